-- The change log of the synchronizer's incremental pass (issue 28). Every statement that
-- inserts, updates or deletes a row the synchronizer's state of a job is read from (the
-- job, its desired and actual deployment, its CronJob intents, its sources, images and
-- build attempts) appends the names it touched here, with the id of its transaction. A
-- pass reads the rows of the names logged since the oldest transaction that was still
-- running when the previous pass read (the xmin of its snapshot), instead of every row:
-- every transaction the previous read could not see has an id at or above that xmin, so a
-- change committed while a pass reads is read by the next one. xid8 has 64 bits and does
-- not wrap around. Only appends: no row lock is shared by two writers of one name, so the
-- log adds no lock wait and no deadlock to the writers'. The leader deletes what its
-- passes have read (PruneSyncChanges); a new leader starts with a full read.
CREATE TABLE sync_change (
    data_job_name text NOT NULL,
    changed_xid   xid8 NOT NULL DEFAULT pg_current_xact_id()
);
CREATE INDEX sync_change_xid ON sync_change (changed_xid);

-- One statement-level trigger per event and table: a group commit of 500 applied rows
-- appends its 500 names in one INSERT, not one per row. TG_ARGV[0] is the table's
-- column of the job name. Names are never updated, so an update's new rows suffice.
CREATE FUNCTION sync_change_note() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('INSERT INTO sync_change (data_job_name) SELECT DISTINCT %I FROM changed', TG_ARGV[0]);
    RETURN NULL;
END $$;

DO $$
DECLARE
    t record;
BEGIN
    FOR t IN SELECT * FROM (VALUES
        ('data_job', 'name'),
        ('desired_data_job_deployment', 'data_job_name'),
        ('actual_data_job_deployment', 'data_job_name'),
        ('cronjob_intent', 'data_job_name'),
        ('data_job_source', 'job_name'),
        ('data_job_image', 'job_name'),
        ('data_job_build_attempt', 'job_name')) AS v(tab, col)
    LOOP
        EXECUTE format('CREATE TRIGGER sync_change_insert AFTER INSERT ON %I REFERENCING NEW TABLE AS changed
            FOR EACH STATEMENT EXECUTE FUNCTION sync_change_note(%L)', t.tab, t.col);
        EXECUTE format('CREATE TRIGGER sync_change_update AFTER UPDATE ON %I REFERENCING NEW TABLE AS changed
            FOR EACH STATEMENT EXECUTE FUNCTION sync_change_note(%L)', t.tab, t.col);
        EXECUTE format('CREATE TRIGGER sync_change_delete AFTER DELETE ON %I REFERENCING OLD TABLE AS changed
            FOR EACH STATEMENT EXECUTE FUNCTION sync_change_note(%L)', t.tab, t.col);
    END LOOP;
END $$;
