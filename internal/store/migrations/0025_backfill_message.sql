-- Backfills (issue 27), after 0020.

-- Why the platform cancelled a backfill (its job or deployment was deleted, or the job
-- moved to another team); empty for a user's cancel.
ALTER TABLE data_job_backfill ADD COLUMN message text NOT NULL DEFAULT '';

-- The outcome of a finished backfill's runs, counted when it finished: retention deletes
-- finished executions (never those of an open backfill), and a backfill's progress must
-- still add up after it did.
ALTER TABLE data_job_backfill
    ADD COLUMN succeeded integer,
    ADD COLUMN failed integer,
    ADD COLUMN cancelled integer;
