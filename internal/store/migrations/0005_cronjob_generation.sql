-- The metadata.generation of the CronJob when the synchronizer last applied or verified
-- it (0: unknown). Kubernetes bumps it on every spec change and not on status updates, so
-- a new leader can tell that a CronJob is untouched without comparing it field by field.
ALTER TABLE actual_data_job_deployment ADD COLUMN cronjob_generation bigint NOT NULL DEFAULT 0;
