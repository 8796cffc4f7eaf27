-- Jobs as code (issue 46): a job or pipeline applied from a team's file is owned by it
-- (managed_by, the file's repository; NULL: none), and every revision an apply records
-- keeps where its file came from (source, <repo>@<commit>; '' for the API's changes).
-- Adding nullable columns and columns with a constant default rewrites no table.
ALTER TABLE data_job ADD COLUMN managed_by text;
ALTER TABLE pipeline ADD COLUMN managed_by text;
ALTER TABLE data_job_revision ADD COLUMN source text NOT NULL DEFAULT '';
ALTER TABLE pipeline_revision ADD COLUMN source text NOT NULL DEFAULT '';
