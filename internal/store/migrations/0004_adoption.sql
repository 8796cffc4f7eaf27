-- A deployment imported from a CronJob that datajobs did not create keeps that CronJob's
-- spec (adopted_spec) and adopts only the object with that UID (adopt_cronjob_uid).
ALTER TABLE desired_data_job_deployment
    ADD COLUMN adopt_cronjob_uid text,
    ADD COLUMN adopted_spec      jsonb;
