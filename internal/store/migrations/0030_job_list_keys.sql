-- The values the jobs list orders and filters by that no column of data_job holds (issue 28):
-- a job's enabled flag, its sync status and the schedule its next run is computed from are
-- expressions over the job, its desired deployment and the actual one of its incarnation;
-- sorting or filtering 100,000 jobs on them joined and sorted every row (0.8-4 s a page).
-- data_job_list holds them in indexed columns, one row per job, written in the transaction
-- of every change to their sources, by triggers: no writer can forget them.
--
-- Each source table's trigger writes only the copies of its own columns (j_*: data_job,
-- d_*: desired, a_*: actual), from its row, never reading another table: two
-- transactions changing a job's desired and actual rows at once each update their own
-- columns of the one row (the second waits for the first's row lock and updates the latest
-- version), so the row always holds every source's latest committed values. The derived
-- columns are GENERATED from those copies, with the expressions the list used before
-- (store/list.go: syncStatusExpr, zonedDeploymentSchedule), so they cannot disagree with
-- what the page shows. The actual row counts only for the job's incarnation (a_uid = uid).
CREATE TABLE data_job_list (
    name                 text PRIMARY KEY REFERENCES data_job (name) ON DELETE CASCADE,
    team                 text NOT NULL,
    uid                  uuid NOT NULL,
    generation           bigint NOT NULL,
    d_present            boolean NOT NULL DEFAULT false,
    d_enabled            boolean,
    d_status             text,
    d_status_generation  bigint,
    d_schedule           text,
    d_time_zone          text,
    a_uid                uuid,
    a_enabled            boolean,
    a_schedule           text,
    -- COALESCE(d.enabled, a.enabled): NULL when not deployed.
    enabled boolean GENERATED ALWAYS AS (
        CASE WHEN d_present THEN d_enabled WHEN a_uid = uid THEN a_enabled END) STORED,
    -- job.Listed.Status: pending while the result is for an older generation, deleting
    -- while only the actual deployment is left, NULL when not deployed.
    sync_status text GENERATED ALWAYS AS (
        CASE WHEN d_present THEN CASE WHEN d_status_generation < generation THEN 'pending' ELSE d_status END
             WHEN a_uid = uid THEN 'deleting' END) STORED,
    -- The key of the next run the console shows (job.FieldDeploymentNextRun): the
    -- deployment's schedule in its time zone (job.ZonedSchedule) while it is enabled, ''
    -- when it has none (disabled, not deployed, no schedule). The next run itself changes
    -- with time and is computed per distinct key by the reader (store/listnext.go).
    next_run_key text NOT NULL GENERATED ALWAYS AS (
        CASE WHEN (CASE WHEN d_present THEN d_enabled WHEN a_uid = uid THEN a_enabled END) IS TRUE
              AND COALESCE(CASE WHEN d_present THEN d_schedule WHEN a_uid = uid THEN a_schedule END, '') <> ''
        THEN 'CRON_TZ=' || COALESCE(NULLIF(CASE WHEN d_present THEN d_time_zone END, ''), 'UTC') || ' ' ||
             CASE WHEN d_present THEN d_schedule ELSE a_schedule END
        ELSE '' END) STORED
);
-- One index per order of the list (ties broken by name ascending in either direction, as
-- the list's ORDER BY has them) and for the filters.
CREATE INDEX data_job_list_team_idx ON data_job_list (team, name);
CREATE INDEX data_job_list_team_desc_idx ON data_job_list (team DESC NULLS LAST, name);
CREATE INDEX data_job_list_name_desc_idx ON data_job_list (name DESC NULLS LAST);
CREATE INDEX data_job_list_name_pattern_idx ON data_job_list (name text_pattern_ops);
CREATE INDEX data_job_list_sync_status_idx ON data_job_list (sync_status, name);
CREATE INDEX data_job_list_sync_status_desc_idx ON data_job_list (sync_status DESC NULLS LAST, name);
CREATE INDEX data_job_list_enabled_idx ON data_job_list (enabled, name);
CREATE INDEX data_job_list_enabled_desc_idx ON data_job_list (enabled DESC NULLS LAST, name);
CREATE INDEX data_job_list_next_run_key_idx ON data_job_list (next_run_key, name);

-- The orders on data_job's own columns that no index held.
CREATE INDEX data_job_last_execution_status_idx ON data_job (last_execution_status, name);
CREATE INDEX data_job_last_execution_status_desc_idx ON data_job (last_execution_status DESC NULLS LAST, name);
CREATE INDEX data_job_last_execution_end_time_asc_idx ON data_job (last_execution_end_time, name);
-- The jobs of one configuration schedule by name, for GraphQL's sort by its next run.
CREATE INDEX data_job_schedule_idx ON data_job (schedule, name);

INSERT INTO data_job_list (name, team, uid, generation, d_present, d_enabled, d_status, d_status_generation,
    d_schedule, d_time_zone, a_uid, a_enabled, a_schedule)
SELECT j.name, j.team, j.uid, j.generation, d.data_job_name IS NOT NULL, d.enabled, d.status, d.status_generation,
    d.schedule, d.run_policy->>'time_zone', a.job_uid, a.enabled, a.schedule
FROM data_job j
LEFT JOIN desired_data_job_deployment d ON d.data_job_name = j.name
LEFT JOIN actual_data_job_deployment a ON a.data_job_name = j.name;

-- The triggers are deferred to the commit (constraint triggers, so row-level): a
-- statement-level trigger locked the job's data_job_list row in the middle of its
-- transaction, so two transactions that touch one job's rows in different orders
-- deadlocked on it. The API's deploy changes data_job (its generation; the list row
-- locked) and then the desired row; the synchronizer's group commit locks the desired
-- row and then the list row in one statement: each waited for the other's lock (CI:
-- "deadlock detected" on a PATCH of a deployment, TestRollbackRestoresThePreviousCronJob).
-- At the commit a transaction holds every lock of its statements already and takes the
-- list row last. Each trigger writes its row's values as of its event, in the order of
-- the events, so a row changed twice ends with the second.

-- A new job: its row, with whatever actual row its name has (an older incarnation's being
-- deleted, which a_uid <> uid leaves out). No desired row can precede its job (foreign key).
-- The job as it is at the commit: it may have been deleted (nothing to list) or changed
-- since the insert, in the same transaction.
CREATE FUNCTION data_job_list_job_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO data_job_list (name, team, uid, generation, a_uid, a_enabled, a_schedule)
    SELECT j.name, j.team, j.uid, j.generation, a.job_uid, a.enabled, a.schedule
    FROM data_job j LEFT JOIN actual_data_job_deployment a ON a.data_job_name = j.name
    WHERE j.name = NEW.name
    ON CONFLICT (name) DO UPDATE SET team = excluded.team, uid = excluded.uid, generation = excluded.generation;
    RETURN NULL;
END $$;

CREATE FUNCTION data_job_list_job_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE data_job_list l SET team = NEW.team, uid = NEW.uid, generation = NEW.generation
    WHERE l.name = NEW.name AND (l.team, l.uid, l.generation) IS DISTINCT FROM (NEW.team, NEW.uid, NEW.generation);
    RETURN NULL;
END $$;

CREATE FUNCTION data_job_list_desired_set() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE data_job_list l SET d_present = true, d_enabled = NEW.enabled, d_status = NEW.status,
        d_status_generation = NEW.status_generation, d_schedule = NEW.schedule, d_time_zone = NEW.run_policy->>'time_zone'
    WHERE l.name = NEW.data_job_name
      AND (l.d_present, l.d_enabled, l.d_status, l.d_status_generation, l.d_schedule, l.d_time_zone)
          IS DISTINCT FROM (true, NEW.enabled, NEW.status, NEW.status_generation, NEW.schedule, NEW.run_policy->>'time_zone');
    RETURN NULL;
END $$;

CREATE FUNCTION data_job_list_desired_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE data_job_list l SET d_present = false, d_enabled = NULL, d_status = NULL,
        d_status_generation = NULL, d_schedule = NULL, d_time_zone = NULL
    WHERE l.name = OLD.data_job_name AND l.d_present;
    RETURN NULL;
END $$;

CREATE FUNCTION data_job_list_actual_set() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE data_job_list l SET a_uid = NEW.job_uid, a_enabled = NEW.enabled, a_schedule = NEW.schedule
    WHERE l.name = NEW.data_job_name
      AND (l.a_uid, l.a_enabled, l.a_schedule) IS DISTINCT FROM (NEW.job_uid, NEW.enabled, NEW.schedule);
    RETURN NULL;
END $$;

CREATE FUNCTION data_job_list_actual_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE data_job_list l SET a_uid = NULL, a_enabled = NULL, a_schedule = NULL
    WHERE l.name = OLD.data_job_name AND l.a_uid IS NOT NULL;
    RETURN NULL;
END $$;

CREATE CONSTRAINT TRIGGER data_job_list_insert AFTER INSERT ON data_job
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION data_job_list_job_insert();
CREATE CONSTRAINT TRIGGER data_job_list_update AFTER UPDATE ON data_job
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION data_job_list_job_update();
CREATE CONSTRAINT TRIGGER data_job_list_insert AFTER INSERT ON desired_data_job_deployment
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION data_job_list_desired_set();
CREATE CONSTRAINT TRIGGER data_job_list_update AFTER UPDATE ON desired_data_job_deployment
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION data_job_list_desired_set();
CREATE CONSTRAINT TRIGGER data_job_list_delete AFTER DELETE ON desired_data_job_deployment
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION data_job_list_desired_delete();
CREATE CONSTRAINT TRIGGER data_job_list_insert AFTER INSERT ON actual_data_job_deployment
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION data_job_list_actual_set();
CREATE CONSTRAINT TRIGGER data_job_list_update AFTER UPDATE ON actual_data_job_deployment
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION data_job_list_actual_set();
CREATE CONSTRAINT TRIGGER data_job_list_delete AFTER DELETE ON actual_data_job_deployment
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION data_job_list_actual_delete();

-- A TRUNCATE fires no row trigger: emptying a source table (a restore by TRUNCATE and
-- INSERT) clears its copies. Truncating data_job truncates data_job_list (CASCADE).
CREATE FUNCTION data_job_list_desired_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE data_job_list SET d_present = false, d_enabled = NULL, d_status = NULL,
        d_status_generation = NULL, d_schedule = NULL, d_time_zone = NULL
    WHERE d_present;
    RETURN NULL;
END $$;

CREATE FUNCTION data_job_list_actual_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE data_job_list SET a_uid = NULL, a_enabled = NULL, a_schedule = NULL WHERE a_uid IS NOT NULL;
    RETURN NULL;
END $$;

CREATE TRIGGER data_job_list_truncate AFTER TRUNCATE ON desired_data_job_deployment
    FOR EACH STATEMENT EXECUTE FUNCTION data_job_list_desired_truncate();
CREATE TRIGGER data_job_list_truncate AFTER TRUNCATE ON actual_data_job_deployment
    FOR EACH STATEMENT EXECUTE FUNCTION data_job_list_actual_truncate();
