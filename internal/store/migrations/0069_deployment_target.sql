-- A deployment may name the execution target it runs in (issue 44), one whose teams grant
-- its team; without one it runs in its team's default target. A job's target is then its
-- deployment's, else its team's (datajobs_job_target), wherever a run is recorded.
ALTER TABLE desired_data_job_deployment ADD COLUMN execution_target text REFERENCES execution_target (name);
CREATE INDEX desired_data_job_deployment_execution_target_idx ON desired_data_job_deployment (execution_target)
    WHERE execution_target IS NOT NULL;

CREATE FUNCTION datajobs_job_target(job text) RETURNS text LANGUAGE sql STABLE AS
    $$ SELECT coalesce((SELECT d.execution_target FROM desired_data_job_deployment d WHERE d.data_job_name = job),
        (SELECT tt.target FROM data_job j JOIN execution_target_team tt ON tt.team = j.team WHERE j.name = job),
        'default') $$;

CREATE OR REPLACE FUNCTION data_job_execution_fill_target() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.target := coalesce(NEW.target, datajobs_job_target(NEW.job_name));
    RETURN NEW;
END $$;
