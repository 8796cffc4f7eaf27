-- An execution outlives its job (DESIGN.md invariant 11): deleting a job (or its
-- deployment, or moving it to another team) asks the synchronizer leader to cancel its
-- submitted and running executions, and their rows stay readable as cancelled until
-- retention removes them. Until this migration the rows were deleted with the job (ON
-- DELETE CASCADE), while their Kubernetes Jobs kept running out of anyone's reach.

ALTER TABLE data_job_execution DROP CONSTRAINT data_job_execution_job_name_fkey;

-- The team the execution's job belonged to when it ran (or moved to since): what decides
-- who reads the row once the job is gone. A job's lists read its executions by job_uid;
-- a same-name job created after a delete sees none of the old runs.
ALTER TABLE data_job_execution
    ADD COLUMN team text,
    -- The message a cancel records (empty: a user's cancel, "Cancelled on request.").
    ADD COLUMN cancel_message text NOT NULL DEFAULT '';

UPDATE data_job_execution e SET job_uid = COALESCE(e.job_uid, j.uid), team = j.team
FROM data_job j WHERE j.name = e.job_name;

-- Every insert names its job incarnation (or its job by name): the team, and an unnamed
-- incarnation, come from the job row, so no writer repeats them.
CREATE FUNCTION data_job_execution_fill_job() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    uid  uuid;
    team text;
BEGIN
    IF NEW.team IS NULL OR NEW.job_uid IS NULL THEN
        SELECT j.uid, j.team INTO uid, team
        FROM data_job j WHERE j.name = NEW.job_name AND (NEW.job_uid IS NULL OR j.uid = NEW.job_uid);
        NEW.job_uid := COALESCE(NEW.job_uid, uid);
        NEW.team := COALESCE(NEW.team, team);
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER data_job_execution_fill_job BEFORE INSERT ON data_job_execution
    FOR EACH ROW EXECUTE FUNCTION data_job_execution_fill_job();

-- A job's executions by incarnation (its lists, retention, the cancel of a delete).
CREATE INDEX data_job_execution_job_uid_idx ON data_job_execution (job_uid, end_time DESC);
