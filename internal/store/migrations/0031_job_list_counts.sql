-- The number of jobs per team and next-run key (issue 28): every page of the jobs list
-- counted the jobs that pass its filter (VDK's totalItems and totalPages), a scan of all
-- 100,000 for the unfiltered list, and the sort by next run needs the jobs per distinct
-- schedule to find its page (store/listnext.go). Without a filter but the caller's teams,
-- both are sums of these rows, written in the transaction of every change by triggers on
-- data_job_list (0030). The rows are deltas, appended and never updated: one counter row
-- per (team, key), upserted, locked every writer of that team's jobs until its commit (two
-- transactions disabling two jobs of one team waited for each other, and one open
-- transaction stalled the team's every change); Store.CompactJobListCounts adds them up
-- into one row per (team, key) now and then (the server's housekeeping loop), so a read
-- sums a few rows per team.
CREATE TABLE data_job_list_count (
    team         text NOT NULL,
    next_run_key text NOT NULL,
    jobs         bigint NOT NULL
);

CREATE INDEX data_job_list_count_team ON data_job_list_count (team, next_run_key);

INSERT INTO data_job_list_count (team, next_run_key, jobs)
SELECT team, next_run_key, count(*) FROM data_job_list GROUP BY team, next_run_key;

CREATE FUNCTION data_job_list_count_note() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO data_job_list_count (team, next_run_key, jobs)
        SELECT team, next_run_key, count(*) FROM new_rows GROUP BY 1, 2;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO data_job_list_count (team, next_run_key, jobs)
        SELECT team, next_run_key, -count(*) FROM old_rows GROUP BY 1, 2;
    ELSE
        -- Most updates (a sync status, a generation) change neither column: the old and
        -- the new row cancel out and nothing is written.
        INSERT INTO data_job_list_count (team, next_run_key, jobs)
        SELECT team, next_run_key, sum(n) FROM (
            SELECT team, next_run_key, 1 AS n FROM new_rows
            UNION ALL SELECT team, next_run_key, -1 FROM old_rows) d
        GROUP BY 1, 2 HAVING sum(n) <> 0;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER data_job_list_count_insert AFTER INSERT ON data_job_list REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION data_job_list_count_note();
CREATE TRIGGER data_job_list_count_update AFTER UPDATE ON data_job_list REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION data_job_list_count_note();
CREATE TRIGGER data_job_list_count_delete AFTER DELETE ON data_job_list REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION data_job_list_count_note();

-- A TRUNCATE of data_job_list (with data_job's, CASCADE) fires no row trigger: it empties
-- the counts too.
CREATE FUNCTION data_job_list_count_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM data_job_list_count;
    RETURN NULL;
END $$;

CREATE TRIGGER data_job_list_count_truncate AFTER TRUNCATE ON data_job_list
    FOR EACH STATEMENT EXECUTE FUNCTION data_job_list_count_truncate();
