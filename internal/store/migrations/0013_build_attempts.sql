-- Builds started and not finished, per build key (job, job version, python version, base
-- image; docs/builder.md). A build counts when it starts, not when it fails: a build that
-- kills the leader (out of memory, a crash) never gets to record a failure, and the next
-- leader must not start it at once. The row goes when the build ends with an image or a
-- user error; until then each leader waits a backoff that grows with the count, from
-- the last start, before it starts the build again.
CREATE TABLE data_job_build_attempt (
    job_name        text NOT NULL REFERENCES data_job (name) ON DELETE CASCADE,
    job_version     text NOT NULL,
    python_version  text NOT NULL,
    base_image      text NOT NULL,
    attempts        integer NOT NULL CHECK (attempts > 0),
    last_started_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_name, job_version, python_version, base_image)
);
