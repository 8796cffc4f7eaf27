-- Run policy, missed runs, re-runs and backfills (issue 27).

-- The run policy of a deployment (job.RunPolicy as JSON): retries, timeout, concurrency,
-- time zone, starting deadline, catch-up. '{}' is the platform's defaults, today's
-- behaviour, so every deployment from before keeps rendering the same CronJob.
ALTER TABLE desired_data_job_deployment
    ADD COLUMN run_policy jsonb NOT NULL DEFAULT '{}';

-- A backfill: one run per schedule time of a deployment in [from_time, to_time], at most
-- max_parallel at once. The leader starts the next times (times[next_index:]) as runs end;
-- a cancel stops what has not started and the runs in flight.
CREATE TABLE data_job_backfill (
    id            bigserial PRIMARY KEY,
    job_name      text NOT NULL,
    job_uid       uuid NOT NULL,
    team          text NOT NULL,
    from_time     timestamptz NOT NULL,
    to_time       timestamptz NOT NULL,
    max_parallel  integer NOT NULL CHECK (max_parallel > 0),
    times         timestamptz[] NOT NULL,
    next_index    integer NOT NULL DEFAULT 0,
    args          jsonb,
    created_by    text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    cancelled_by  text,
    cancelled_at  timestamptz,
    finished_at   timestamptz
);
CREATE INDEX data_job_backfill_job ON data_job_backfill (job_uid, id DESC);
CREATE INDEX data_job_backfill_open ON data_job_backfill (id) WHERE finished_at IS NULL;

-- What an execution was started for: the logical (schedule) time of a backfill or
-- catch-up run, its backfill, and the execution a re-run repeats.
ALTER TABLE data_job_execution
    ADD COLUMN logical_time timestamptz,
    ADD COLUMN backfill_id bigint REFERENCES data_job_backfill (id) ON DELETE SET NULL,
    ADD COLUMN rerun_of text;
CREATE INDEX data_job_execution_backfill ON data_job_execution (backfill_id) WHERE backfill_id IS NOT NULL;

-- Up to which schedule time the leader has accounted for every run of a job incarnation:
-- started by the CronJob controller, started late (catch-up) or recorded as skipped.
CREATE TABLE data_job_schedule_mark (
    job_uid       uuid PRIMARY KEY,
    job_name      text NOT NULL,
    checked_until timestamptz NOT NULL
);
