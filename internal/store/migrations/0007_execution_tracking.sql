-- Executions are recorded: a manual start is a submitted row the synchronizer leader turns
-- into a Kubernetes Job; the leader records every status transition of every Job of a
-- managed job (manual or scheduled) and keeps the last part of the log of each finished one.

ALTER TABLE data_job_execution
    -- The incarnation of the job the execution belongs to (data_job.uid): a run of an older
    -- job of the same name is never attached to the new one. NULL only on rows written
    -- before this migration.
    ADD COLUMN job_uid             uuid,
    -- The arguments of a manual start (a JSON object of strings, numbers and booleans).
    ADD COLUMN args                jsonb,
    -- A cancel asked through the API: the leader deletes the Job, then records cancelled.
    ADD COLUMN cancel_requested_at timestamptz,
    ADD COLUMN cancel_requested_by text NOT NULL DEFAULT '',
    ADD COLUMN created_at          timestamptz NOT NULL DEFAULT now();

-- The executions not yet final: what a new leader reconciles first, and what a start checks.
CREATE INDEX data_job_execution_active_idx ON data_job_execution (job_name)
    WHERE status IN ('submitted', 'running');

-- The last part of the log of a finished execution, kept after Kubernetes deleted its pod.
-- Out of the execution row, so that lists never read it.
CREATE TABLE data_job_execution_log (
    execution_id text PRIMARY KEY REFERENCES data_job_execution (id) ON DELETE CASCADE,
    logs         text NOT NULL,
    -- The log was longer than what is kept: logs holds its end.
    truncated    boolean NOT NULL DEFAULT false,
    stored_at    timestamptz NOT NULL DEFAULT now()
);

-- VDK's latest_job_execution_id: the execution of the last final status on the job row.
ALTER TABLE data_job ADD COLUMN last_execution_id text;
