-- Jobs as code (issue 46): a trigger applied from a team's file is owned by it, as a job or
-- a pipeline is (0060): managed_by is the file's repository (NULL: none).
ALTER TABLE job_trigger ADD COLUMN managed_by text;
