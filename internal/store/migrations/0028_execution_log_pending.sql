-- The log of a finished execution is read from its pod after its final status is written
-- (a slow pods/log read delays no status). Between the two the row is pending: written in
-- the final status's statement, so that an execution whose pod is deleted before the
-- leader read it (a Job deleted by hand at once) is told apart from one whose log is
-- empty or that never had a pod. The leader turns it into the kept log; a pending row
-- whose pod is gone stays pending, and the API answers that the log was not kept.
ALTER TABLE data_job_execution_log ADD COLUMN pending boolean NOT NULL DEFAULT false;
