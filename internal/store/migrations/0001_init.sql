-- The source of truth of datajobs: jobs, the deployment users asked for (desired), and
-- what the synchronizer last applied to Kubernetes (actual).

CREATE TABLE data_job (
    name                              text PRIMARY KEY,
    -- uid changes with every new incarnation of a name (delete, then create again).
    uid                               uuid NOT NULL UNIQUE,
    team                              text NOT NULL,
    description                       text NOT NULL DEFAULT '',
    schedule                          text NOT NULL DEFAULT '',
    db_default_type                   text NOT NULL DEFAULT '',
    notified_on_job_failure_user_error     text[] NOT NULL DEFAULT '{}',
    notified_on_job_failure_platform_error text[] NOT NULL DEFAULT '{}',
    notified_on_job_success                text[] NOT NULL DEFAULT '{}',
    notified_on_job_deploy                 text[] NOT NULL DEFAULT '{}',
    generate_keytab                   boolean NOT NULL DEFAULT true,
    enable_execution_notifications    boolean NOT NULL DEFAULT true,
    notification_delay_period_minutes integer NOT NULL DEFAULT 240,
    -- generation is bumped by every change that can affect the rendered CronJob.
    generation                        bigint NOT NULL DEFAULT 1,
    created_at                        timestamptz NOT NULL DEFAULT now(),
    updated_at                        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX data_job_team_name_idx ON data_job (team, name);

CREATE TABLE desired_data_job_deployment (
    data_job_name                   text PRIMARY KEY REFERENCES data_job (name) ON DELETE CASCADE,
    git_commit_sha                  text NOT NULL,
    vdk_version                     text NOT NULL DEFAULT '',
    python_version                  text NOT NULL,
    schedule                        text NOT NULL DEFAULT '',
    -- NULL resources mean "the configured default".
    resources_cpu_request_millis    bigint,
    resources_cpu_limit_millis      bigint,
    resources_memory_request_bytes  bigint,
    resources_memory_limit_bytes    bigint,
    enabled                         boolean NOT NULL DEFAULT true,
    last_deployed_by                text NOT NULL,
    last_deployed_date              timestamptz NOT NULL DEFAULT now(),
    -- Written by the synchronizer, for the job generation in status_generation.
    status                          text NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'synced', 'user_error', 'platform_error')),
    message                         text NOT NULL DEFAULT '',
    status_generation               bigint NOT NULL DEFAULT 0,
    last_sync_at                    timestamptz
);
CREATE INDEX desired_data_job_deployment_status_idx ON desired_data_job_deployment (status);

-- No foreign key to data_job: the row must outlive its job until the synchronizer has
-- confirmed the CronJob gone (asynchronous deletion).
CREATE TABLE actual_data_job_deployment (
    data_job_name                   text PRIMARY KEY,
    job_uid                         uuid NOT NULL,
    generation                      bigint NOT NULL,
    team                            text NOT NULL,
    deployment_version_sha          text NOT NULL,
    git_commit_sha                  text NOT NULL,
    vdk_version                     text NOT NULL DEFAULT '',
    python_version                  text NOT NULL,
    schedule                        text NOT NULL DEFAULT '',
    resources_cpu_request_millis    bigint NOT NULL,
    resources_cpu_limit_millis      bigint NOT NULL,
    resources_memory_request_bytes  bigint NOT NULL,
    resources_memory_limit_bytes    bigint NOT NULL,
    enabled                         boolean NOT NULL,
    last_deployed_by                text NOT NULL,
    last_deployed_date              timestamptz NOT NULL
);
CREATE INDEX actual_data_job_deployment_job_uid_idx ON actual_data_job_deployment (job_uid);

CREATE TABLE job_properties (
    job_name        text PRIMARY KEY REFERENCES data_job (name) ON DELETE CASCADE,
    properties_json jsonb NOT NULL DEFAULT '{}'
);

-- One row per leadership (only 'synchronizer' today). epoch is the fencing token: it
-- grows with every change of holder, and the leader's writes are conditioned on it.
CREATE TABLE leader_lease (
    name        text PRIMARY KEY,
    holder      text NOT NULL,
    epoch       bigint NOT NULL,
    acquired_at timestamptz NOT NULL,
    renewed_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL
);
