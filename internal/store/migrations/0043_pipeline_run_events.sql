-- A pipeline run's end is a notification (issue 40, item 5): one event per run that ends,
-- never one per node. It is written by a trigger in the statement that records the run's
-- final status, whichever writer that is (the stepper, a cancel, a pipeline's delete), so
-- the event exists exactly when the status committed, as the outbox's other events
-- (store/outbox.go). The key holds the run, its status and its end: a repair makes the
-- run running again, and its next end is a new event; a write of the same end is none.
--
-- job_name is 'pipeline:<name>' (a colon is never in a job's name): the job pages that
-- list a job's events never show a pipeline's. recipients are the run's pinned spec's
-- contacts of the outcome when the spec has them (contacts.notified_on_run_success,
-- contacts.notified_on_run_failure; a cancel goes to the failure contacts), else none: the
-- team's webhooks that ask for pipeline_run_<status> get it either way.
CREATE FUNCTION pipeline_run_finished_event() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    contacts text[];
BEGIN
    SELECT coalesce(array_agg(c), '{}') INTO contacts FROM jsonb_array_elements_text(
        CASE WHEN jsonb_typeof(NEW.spec->'contacts'->(CASE NEW.status WHEN 'succeeded' THEN 'notified_on_run_success'
            ELSE 'notified_on_run_failure' END)) = 'array'
        THEN NEW.spec->'contacts'->(CASE NEW.status WHEN 'succeeded' THEN 'notified_on_run_success'
            ELSE 'notified_on_run_failure' END)
        ELSE '[]'::jsonb END) c;
    INSERT INTO notification_event (key, kind, job_name, team, recipients, payload)
    SELECT 'pipeline-run:' || NEW.id || ':' || NEW.status || ':' || extract(epoch FROM coalesce(NEW.end_time, now())),
        'pipeline_run_finished', 'pipeline:' || NEW.pipeline_name, NEW.team, contacts,
        jsonb_build_object('pipeline', NEW.pipeline_name, 'run_id', NEW.id, 'status', NEW.status,
            'logical_time', NEW.logical_time, 'started_by', NEW.started_by,
            'start_time', NEW.start_time, 'end_time', NEW.end_time,
            'duration_seconds', GREATEST(0, EXTRACT(EPOCH FROM coalesce(NEW.end_time, now()) - NEW.start_time))::bigint,
            'nodes', (SELECT coalesce(jsonb_agg(jsonb_build_object('name', nr.node, 'status', nr.status, 'message', nr.message)
                ORDER BY nr.node), '[]'::jsonb)
                FROM (SELECT DISTINCT ON (r.node) r.node, r.message,
                        CASE WHEN e.status IN ('succeeded', 'user_error', 'platform_error', 'cancelled', 'skipped')
                            THEN e.status ELSE r.status END AS status
                      FROM pipeline_node_run r LEFT JOIN data_job_execution e ON e.id = r.execution_id
                      WHERE r.run_id = NEW.id ORDER BY r.node, r.attempt DESC) nr
                WHERE nr.status NOT IN ('succeeded', 'skipped')))
    ON CONFLICT (key) DO NOTHING;
    RETURN NULL;
END
$$;

CREATE TRIGGER pipeline_run_finished_event AFTER UPDATE OF status ON pipeline_run
    FOR EACH ROW WHEN (NEW.status IN ('succeeded', 'failed', 'cancelled') AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION pipeline_run_finished_event();
