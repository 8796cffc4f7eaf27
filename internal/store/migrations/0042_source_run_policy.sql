-- The run policy keys of a version's config.ini ([job] retries, timeout_seconds, ...; issue
-- 48), read when it is uploaded, as the JSON of job.PolicyChange: a deploy of the version
-- applies them under the request's own fields. NULL: the file sets none, or the version
-- was uploaded before this column (its config.ini is not read again).
ALTER TABLE data_job_source ADD COLUMN run_policy jsonb;
