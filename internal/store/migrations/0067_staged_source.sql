-- Sources staged for an apply (issue 46): `datajobs apply -f` uploads a deployment's source
-- folder to its team (POST /data-jobs/for-team/{team}/sources) before the apply, which
-- needs no job and changes none; the apply that deploys the version moves it to the job's
-- sources (data_job_source) in its own transaction. One that no apply took is deleted by
-- the retention once uploaded_at is older than its bound: a failed apply leaves nothing
-- else. Content-addressed as data_job_source is, and counted in the team's sources quota.
CREATE TABLE staged_source (
    team        text NOT NULL,
    version_sha text NOT NULL,
    archive     bytea NOT NULL,
    size_bytes  bigint NOT NULL,
    reason      text NOT NULL DEFAULT '',
    uploaded_by text NOT NULL DEFAULT '',
    -- The latest upload of this content: staging it again restarts its time.
    uploaded_at timestamptz NOT NULL,
    run_policy  jsonb,
    PRIMARY KEY (team, version_sha)
);
CREATE INDEX staged_source_uploaded_at_idx ON staged_source (uploaded_at);

-- Zip archives are compressed already (as data_job_source's).
ALTER TABLE staged_source ALTER COLUMN archive SET STORAGE EXTERNAL;
