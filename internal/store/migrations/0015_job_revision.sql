-- The revision of a job's rendering: a value of one sequence, drawn by the insert of every
-- job and by every bump of its generation (each change its CronJob may render). The
-- synchronizer writes it on the CronJob it applies (annotation datajobs.io/revision). A
-- sequence only grows, and a backup restores it to the value it had when it was taken: a
-- live CronJob of this installation whose revision is above its job's row, or above the
-- last value the sequence issued, was rendered from a state this database has lost. The
-- database was restored from an older backup, and the synchronizer writes nothing until
-- the operator accepts it (--accept-restore; docs/operations.md "Restore").
--
-- Not a generation: that one starts again at 1 with every incarnation of a name and says
-- nothing about a job created after the backup. Not a time: clocks move both ways.
CREATE SEQUENCE data_job_revision_seq AS bigint;

-- Every existing job draws one now (the default is evaluated per row).
ALTER TABLE data_job ADD COLUMN revision bigint NOT NULL DEFAULT nextval('data_job_revision_seq');
ALTER SEQUENCE data_job_revision_seq OWNED BY data_job.revision;

CREATE FUNCTION data_job_next_revision() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.revision := nextval('data_job_revision_seq');
    RETURN NEW;
END $$;
-- No writer names the revision: a generation bump draws the next one, whichever statement
-- made it.
CREATE TRIGGER data_job_next_revision BEFORE UPDATE OF generation ON data_job
    FOR EACH ROW WHEN (NEW.generation IS DISTINCT FROM OLD.generation)
    EXECUTE FUNCTION data_job_next_revision();
