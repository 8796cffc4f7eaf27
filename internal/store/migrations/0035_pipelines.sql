-- Pipelines (issue 40): dependencies between data jobs, kept as rows and stepped by the
-- leader. The graph is the pipeline's spec (jsonb, as the PUT stored it, defaults applied)
-- and, for the questions asked of it by other writers (is this job used by a pipeline?),
-- its nodes and edges as rows. A run pins the spec it started with.
CREATE TABLE pipeline (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    team            text NOT NULL,
    name            text NOT NULL,
    description     text NOT NULL DEFAULT '',
    schedule_cron   text NOT NULL DEFAULT '',
    time_zone       text NOT NULL DEFAULT '',
    enabled         boolean NOT NULL DEFAULT true,
    max_active_runs integer NOT NULL DEFAULT 1,
    revision        integer NOT NULL DEFAULT 1,
    spec            jsonb NOT NULL,
    -- the schedule time up to which the leader accounted for every scheduled run
    checked_until   timestamptz,
    created_by      text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_by      text NOT NULL,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (team, name)
);

CREATE TABLE pipeline_node (
    pipeline_id  bigint NOT NULL REFERENCES pipeline (id) ON DELETE CASCADE,
    name         text NOT NULL,
    job_team     text NOT NULL,
    job_name     text NOT NULL,
    trigger_rule text NOT NULL,
    on_failure   text NOT NULL,
    position     integer NOT NULL,
    PRIMARY KEY (pipeline_id, name)
);
-- A job's delete asks whether a pipeline uses it.
CREATE INDEX pipeline_node_job ON pipeline_node (job_name);

CREATE TABLE pipeline_edge (
    pipeline_id bigint NOT NULL,
    node        text NOT NULL,
    depends_on  text NOT NULL,
    PRIMARY KEY (pipeline_id, node, depends_on),
    FOREIGN KEY (pipeline_id, node) REFERENCES pipeline_node (pipeline_id, name) ON DELETE CASCADE,
    FOREIGN KEY (pipeline_id, depends_on) REFERENCES pipeline_node (pipeline_id, name) ON DELETE CASCADE
);

-- Every change of a pipeline is a revision, written in the change's transaction, as a
-- job's are (data_job_revision): who, when, the operation id, the spec after the change.
CREATE TABLE pipeline_revision (
    pipeline_id bigint NOT NULL REFERENCES pipeline (id) ON DELETE CASCADE,
    revision    integer NOT NULL,
    actor       text NOT NULL,
    op_id       text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    spec        jsonb NOT NULL,
    PRIMARY KEY (pipeline_id, revision)
);

-- A backfill of a pipeline: one run per schedule time, started by the leader at most
-- max_parallel at once, oldest first.
CREATE TABLE pipeline_backfill (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    pipeline_id  bigint NOT NULL REFERENCES pipeline (id) ON DELETE CASCADE,
    times        timestamptz[] NOT NULL,
    next_index   integer NOT NULL DEFAULT 0,
    max_parallel integer NOT NULL,
    nodes        text[] NOT NULL DEFAULT '{}',
    created_by   text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz
);
CREATE INDEX pipeline_backfill_open ON pipeline_backfill (id) WHERE finished_at IS NULL;

CREATE TABLE pipeline_run (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    pipeline_id         bigint NOT NULL REFERENCES pipeline (id) ON DELETE CASCADE,
    team                text NOT NULL,
    pipeline_name       text NOT NULL,
    revision            integer NOT NULL,
    spec                jsonb NOT NULL,
    status              text NOT NULL DEFAULT 'running',
    logical_time        timestamptz NOT NULL,
    -- set on scheduled runs only: one run per schedule time, however many leaders try
    schedule_time       timestamptz,
    backfill_id         bigint REFERENCES pipeline_backfill (id) ON DELETE SET NULL,
    arguments           jsonb,
    started_by          text NOT NULL,
    start_time          timestamptz NOT NULL DEFAULT now(),
    end_time            timestamptz,
    cancel_requested_at timestamptz,
    UNIQUE (pipeline_id, schedule_time)
);
CREATE INDEX pipeline_run_list ON pipeline_run (pipeline_id, id DESC);
CREATE INDEX pipeline_run_active ON pipeline_run (id) WHERE status = 'running';

-- One row per node and attempt of a run: a repair adds the next attempt of the nodes it
-- starts again. execution_id is set in the transaction that inserts the execution, under
-- the run's row lock, so that a node starts at most once per attempt.
CREATE TABLE pipeline_node_run (
    run_id       bigint NOT NULL REFERENCES pipeline_run (id) ON DELETE CASCADE,
    node         text NOT NULL,
    attempt      integer NOT NULL,
    job_team     text NOT NULL,
    job_name     text NOT NULL,
    status       text NOT NULL DEFAULT 'pending',
    execution_id text,
    start_time   timestamptz,
    end_time     timestamptz,
    message      text NOT NULL DEFAULT '',
    PRIMARY KEY (run_id, node, attempt)
);
CREATE UNIQUE INDEX pipeline_node_run_execution ON pipeline_node_run (execution_id) WHERE execution_id IS NOT NULL;

-- A team's grant of one of its jobs to another team's pipelines.
CREATE TABLE job_grant (
    job_uid      uuid NOT NULL REFERENCES data_job (uid) ON DELETE CASCADE,
    job_team     text NOT NULL,
    job_name     text NOT NULL,
    grantee_team text NOT NULL,
    granted_by   text NOT NULL,
    granted_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_uid, grantee_team)
);

-- The stepper is woken in the transaction that records a node's execution's final status:
-- the run id on datajobs_pipeline_runs. Only executions a pipeline started (started_by
-- pipeline/...) pay for the lookup.
CREATE FUNCTION pipeline_execution_final() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('datajobs_pipeline_runs', nr.run_id::text)
    FROM pipeline_node_run nr WHERE nr.execution_id = NEW.id;
    RETURN NULL;
END
$$;
CREATE TRIGGER pipeline_execution_final_update AFTER UPDATE OF status ON data_job_execution
    FOR EACH ROW WHEN (NEW.status NOT IN ('submitted', 'running') AND OLD.status IS DISTINCT FROM NEW.status
        AND NEW.started_by LIKE 'pipeline/%')
    EXECUTE FUNCTION pipeline_execution_final();
