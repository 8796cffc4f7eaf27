-- A job's sync state also reads whether its team has OAuth credentials (job.Job.TeamOAuth:
-- its pods then refer to the team's Secret), so a statement that adds or removes a team's
-- credentials changes the state of every job of that team. Without these triggers the
-- incremental pass of 0026 would go on rendering the team's CronJobs without (or with) the
-- reference until the next full read, an hour later. Updates change no state (only the
-- row's existence is read) and are left out.
CREATE FUNCTION sync_change_note_team() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO sync_change (data_job_name)
    SELECT j.name FROM data_job j WHERE j.team IN (SELECT DISTINCT team FROM changed);
    RETURN NULL;
END $$;

CREATE TRIGGER sync_change_insert AFTER INSERT ON team_oauth_credentials REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION sync_change_note_team();
CREATE TRIGGER sync_change_delete AFTER DELETE ON team_oauth_credentials REFERENCING OLD TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION sync_change_note_team();
