-- Executions of data jobs, and what the GraphQL jobs query filters and sorts on.
--
-- The executions feature comes in a later release: until then this table stays empty and
-- the read paths (the GraphQL executions query, GET .../executions) answer empty lists.
-- Column names follow VDK's data_job_execution; statuses and types are VDK's REST
-- spellings as text rather than JPA ordinals, resources are in millicores and bytes as in
-- the deployment tables.

CREATE TABLE data_job_execution (
    -- The name of the Kubernetes Job that runs the execution.
    id                             text PRIMARY KEY,
    job_name                       text NOT NULL REFERENCES data_job (name) ON DELETE CASCADE,
    type                           text NOT NULL CHECK (type IN ('manual', 'scheduled')),
    status                         text NOT NULL CHECK (status IN ('submitted', 'running',
        'succeeded', 'cancelled', 'skipped', 'user_error', 'platform_error')),
    message                        text NOT NULL DEFAULT '',
    op_id                          text NOT NULL,
    start_time                     timestamptz,
    end_time                       timestamptz,
    started_by                     text NOT NULL DEFAULT '',
    -- A snapshot of the deployment the execution ran.
    job_version                    text NOT NULL DEFAULT '',
    job_schedule                   text NOT NULL DEFAULT '',
    vdk_version                    text NOT NULL DEFAULT '',
    job_python_version             text NOT NULL DEFAULT '',
    resources_cpu_request_millis   bigint,
    resources_cpu_limit_millis     bigint,
    resources_memory_request_bytes bigint,
    resources_memory_limit_bytes   bigint,
    last_deployed_date             timestamptz,
    last_deployed_by               text NOT NULL DEFAULT ''
);
-- A job's executions, newest first (VDK's two indexes).
CREATE INDEX data_job_execution_job_name_start_time_idx ON data_job_execution (job_name, start_time DESC);
CREATE INDEX data_job_execution_job_name_end_time_idx ON data_job_execution (job_name, end_time DESC);
-- The executions query across jobs, by time.
CREATE INDEX data_job_execution_start_time_idx ON data_job_execution (start_time DESC);

-- The last finished execution of each job, kept on the job row by whoever records
-- executions, so that the jobs query filters and sorts on them without reading executions.
ALTER TABLE data_job
    ADD COLUMN last_execution_status text CHECK (last_execution_status IN ('submitted', 'running',
        'succeeded', 'cancelled', 'skipped', 'user_error', 'platform_error')),
    ADD COLUMN last_execution_end_time timestamptz,
    -- Seconds.
    ADD COLUMN last_execution_duration integer;

-- The jobs query: the most recent executions first, stopping after one page.
CREATE INDEX data_job_last_execution_end_time_idx ON data_job (last_execution_end_time DESC NULLS LAST, name);
-- jobName patterns with a fixed prefix ('my-job*') under any collation (the primary key
-- serves them only under the C collation).
CREATE INDEX data_job_name_pattern_idx ON data_job (name text_pattern_ops);
