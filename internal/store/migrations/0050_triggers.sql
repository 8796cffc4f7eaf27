-- Triggers (issue 42, docs/triggers.md): what starts a job's manual execution or a
-- pipeline's run when something happens. A trigger's events are rows, written in the
-- transaction of what happened (the signed call's request, or the statement that records
-- an upstream's final status, by the functions below); the leader's firer turns them into
-- runs, each event consumed once, under the lease's fence.
--
-- The signing secret of a webhook or object trigger is its HMAC key, so it must be
-- recoverable: it is kept as team_webhook's is (0017), an envelope of the secrets key ring
-- bound to the trigger's id, or as it is while no key ring is configured (key id '').
CREATE TABLE job_trigger (
    id                    uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    team                  text NOT NULL,
    name                  text NOT NULL,
    spec                  jsonb NOT NULL,
    target_job            text NOT NULL DEFAULT '',
    target_pipeline       text NOT NULL DEFAULT '',
    on_kind               text NOT NULL,
    -- outcome triggers: whose final statuses fire it
    on_team               text NOT NULL DEFAULT '',
    on_job                text NOT NULL DEFAULT '',
    on_pipeline           text NOT NULL DEFAULT '',
    on_statuses           text[] NOT NULL DEFAULT '{}',
    max_events_per_minute integer NOT NULL,
    secret_key_id         text NOT NULL DEFAULT '',
    secret_wrapped_key    bytea,
    secret_sealed         bytea,
    created_by            text NOT NULL,
    created_at            timestamptz NOT NULL DEFAULT now(),
    UNIQUE (team, name)
);
-- The statement that records a final status asks which triggers follow the job or pipeline.
CREATE INDEX job_trigger_on_job ON job_trigger (on_job) WHERE on_kind = 'outcome' AND on_job <> '';
CREATE INDEX job_trigger_on_pipeline ON job_trigger (on_pipeline) WHERE on_kind = 'outcome' AND on_pipeline <> '';

-- One row per event. dedup_key makes an event once: a signed call's Idempotency-Key (or its
-- signature), an upstream execution's id, a pipeline run's end. A repeat counts in
-- duplicates. run is the execution id or the pipeline run id the event started or was
-- coalesced into (coalesced_into names the event that started it).
CREATE TABLE job_trigger_event (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    trigger_id     uuid NOT NULL REFERENCES job_trigger (id) ON DELETE CASCADE,
    received_at    timestamptz NOT NULL DEFAULT now(),
    dedup_key      text,
    duplicates     integer NOT NULL DEFAULT 0,
    source         text NOT NULL,
    arguments      jsonb,
    status         text NOT NULL DEFAULT 'pending',
    message        text NOT NULL DEFAULT '',
    run            text,
    coalesced_into bigint,
    decided_at     timestamptz,
    UNIQUE (trigger_id, dedup_key)
);
CREATE INDEX job_trigger_event_pending ON job_trigger_event (trigger_id, id) WHERE status = 'pending';
CREATE INDEX job_trigger_event_list ON job_trigger_event (trigger_id, received_at DESC);
CREATE INDEX job_trigger_event_received ON job_trigger_event (received_at);

-- An execution's final status fires the outcome triggers that follow its job and name the
-- status, in the statement that records it (the tracker's, a cancel's, a skip's): the event
-- exists exactly when the status committed, once per execution (dedup_key). A trigger of
-- another team needs the job's grant to its team at that moment.
CREATE FUNCTION job_trigger_execution_final() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    tid uuid;
BEGIN
    FOR tid IN
        INSERT INTO job_trigger_event (trigger_id, dedup_key, source, arguments)
        SELECT t.id, 'execution:' || NEW.id,
            'outcome of job ' || NEW.job_name || ' of team ' || NEW.team || ': execution ' || NEW.id || ' ' || NEW.status,
            jsonb_build_object('upstream_team', NEW.team, 'upstream_job', NEW.job_name,
                'upstream_execution_id', NEW.id, 'upstream_status', NEW.status)
        FROM job_trigger t
        WHERE t.on_kind = 'outcome' AND t.on_job = NEW.job_name AND t.on_team = NEW.team AND NEW.status = ANY (t.on_statuses)
            AND (t.team = NEW.team OR EXISTS (SELECT 1 FROM job_grant g WHERE g.job_uid = NEW.job_uid AND g.grantee_team = t.team))
        ON CONFLICT (trigger_id, dedup_key) DO NOTHING
        RETURNING trigger_id
    LOOP
        PERFORM pg_notify('datajobs_trigger_events', tid::text);
    END LOOP;
    RETURN NULL;
END
$$;
CREATE TRIGGER job_trigger_execution_final_update AFTER UPDATE OF status ON data_job_execution
    FOR EACH ROW WHEN (NEW.status NOT IN ('submitted', 'running') AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION job_trigger_execution_final();
CREATE TRIGGER job_trigger_execution_final_insert AFTER INSERT ON data_job_execution
    FOR EACH ROW WHEN (NEW.status NOT IN ('submitted', 'running'))
    EXECUTE FUNCTION job_trigger_execution_final();

-- A pipeline run's end fires the outcome triggers of its team that follow the pipeline, in
-- the statement that records it; a repaired run's next end is another event.
CREATE FUNCTION job_trigger_pipeline_run_final() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    tid uuid;
BEGIN
    FOR tid IN
        INSERT INTO job_trigger_event (trigger_id, dedup_key, source, arguments)
        SELECT t.id, 'pipeline-run:' || NEW.id || ':' || extract(epoch FROM coalesce(NEW.end_time, now())),
            'outcome of pipeline ' || NEW.pipeline_name || ' of team ' || NEW.team || ': run ' || NEW.id || ' ' || NEW.status,
            jsonb_build_object('upstream_team', NEW.team, 'upstream_pipeline', NEW.pipeline_name,
                'upstream_pipeline_run_id', NEW.id, 'upstream_status', NEW.status)
        FROM job_trigger t
        WHERE t.on_kind = 'outcome' AND t.on_pipeline = NEW.pipeline_name AND t.on_team = NEW.team AND t.team = NEW.team
            AND NEW.status = ANY (t.on_statuses)
        ON CONFLICT (trigger_id, dedup_key) DO NOTHING
        RETURNING trigger_id
    LOOP
        PERFORM pg_notify('datajobs_trigger_events', tid::text);
    END LOOP;
    RETURN NULL;
END
$$;
CREATE TRIGGER job_trigger_pipeline_run_final AFTER UPDATE OF status ON pipeline_run
    FOR EACH ROW WHEN (NEW.status IN ('succeeded', 'failed', 'cancelled') AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION job_trigger_pipeline_run_final();
