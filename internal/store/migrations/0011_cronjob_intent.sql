-- The CronJobs the synchronizer is about to create (or to adopt: any write that gives a
-- CronJob the job-uid label of an incarnation the actual table does not hold), written
-- before the write, under the lease and only while the job incarnation still has its
-- desired deployment. With it the database knows every CronJob its installation may have
-- created before Kubernetes does: a CronJob whose job was deleted before its applied row
-- could be written is a delete the database asked for, not an orphan for the prune guard
-- (DESIGN.md invariants 8 and 10, docs/architecture.md "Deletion").
--
-- No foreign key to data_job: like the actual row, an intent outlives its job until the
-- synchronizer has confirmed the CronJob gone. A row ends when the applied row of its
-- name is recorded (the actual row knows the CronJob from then on) or when the CronJob is
-- confirmed gone. The installation is not a column: this database has one (the
-- installation table), and only CronJobs labelled with it are ever looked up here.
CREATE TABLE cronjob_intent (
    job_uid       uuid PRIMARY KEY,
    data_job_name text NOT NULL,
    -- epoch is the leader term that wrote the intent, for an operator reading the table.
    epoch         bigint NOT NULL,
    recorded_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX cronjob_intent_data_job_name_idx ON cronjob_intent (data_job_name);
