-- Hashed schedules (issue 45): a schedule with H fields ("H * * * *") is stored resolved in
-- schedule (what the CronJob runs, what next runs, missed runs and lateness read, what the
-- jobs list's next-run keys hold), and as its user sent it here ('' when it has no H), for
-- the API to answer with. Both are written together by the API's writes (job.ResolveSchedule).
ALTER TABLE data_job ADD COLUMN hashed_schedule text NOT NULL DEFAULT '';
ALTER TABLE desired_data_job_deployment ADD COLUMN hashed_schedule text NOT NULL DEFAULT '';
