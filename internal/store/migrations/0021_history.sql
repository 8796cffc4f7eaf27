-- History and audit (issue 27). Every change of a job or its deployment is a revision,
-- written in the change's transaction: who (the caller the API authenticated), when, the
-- operation id, the job and deployment as they were after the change (spec, the JSON of
-- the domain types) and the field diff against before. Revisions go with their job.
CREATE TABLE data_job_revision (
    job_uid     uuid NOT NULL REFERENCES data_job (uid) ON DELETE CASCADE,
    revision    integer NOT NULL,
    job_name    text NOT NULL,
    kind        text NOT NULL,
    actor       text NOT NULL,
    op_id       text NOT NULL DEFAULT '',
    rollback_of integer,
    created_at  timestamptz NOT NULL DEFAULT now(),
    spec        jsonb NOT NULL,
    diff        jsonb NOT NULL,
    PRIMARY KEY (job_uid, revision)
);

-- The team's audit log: one row per write through the API (and the console), never a
-- request body. It is append-only: an UPDATE, DELETE or TRUNCATE is refused by the
-- triggers below, so not even a bug of the service can rewrite what happened. (An operator
-- who must prune it drops the trigger on purpose, as its owner.)
CREATE TABLE audit_log (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    team       text NOT NULL,
    actor      text NOT NULL,
    op_id      text NOT NULL DEFAULT '',
    method     text NOT NULL,
    route      text NOT NULL,
    path       text NOT NULL,
    job_name   text NOT NULL DEFAULT '',
    status     integer NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX audit_log_team_id ON audit_log (team, id DESC);

CREATE FUNCTION audit_log_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only: % refused', TG_OP USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_refuse_change();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_refuse_change();

-- What an execution's end was (issue 27, the console): the main container's exit code and
-- the reason Kubernetes gives (DeadlineExceeded, BackoffLimitExceeded, OOMKilled, Error,
-- Completed, ...). NULL and '' for runs recorded before, or that never ran a container.
ALTER TABLE data_job_execution
    ADD COLUMN exit_code          integer,
    ADD COLUMN termination_reason text NOT NULL DEFAULT '';
