-- Jobs as code (issue 46): a team's notification webhook applied from its file is owned by
-- it, as a job, a pipeline (0060) or a trigger (0061) is: managed_by is the file's
-- repository (NULL: none).
ALTER TABLE team_webhook ADD COLUMN managed_by text;
