-- Execution profiles (issue 43, docs/profiles.md): what the platform team lets a
-- deployment add to its pods, granted to teams. spec is the JSON of job.Profile without
-- its name. Every installation has the profile 'default' (granted to every team, adding
-- nothing but the team's ServiceAccount), which every deployment selects unless it names
-- another.
CREATE TABLE execution_profile (
    name       text PRIMARY KEY,
    spec       jsonb NOT NULL,
    revision   integer NOT NULL DEFAULT 1,
    updated_by text NOT NULL DEFAULT '',
    updated_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO execution_profile (name, spec, updated_by) VALUES ('default', '{"teams": ["*"]}', 'system');

-- A profile's revisions: who changed it, when, under which operation, to what, and the
-- diff. Kept after a delete (no foreign key), as the history of what ran where.
CREATE TABLE execution_profile_revision (
    name       text NOT NULL,
    revision   integer NOT NULL,
    kind       text NOT NULL,
    actor      text NOT NULL,
    op_id      text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    spec       jsonb NOT NULL,
    diff       jsonb NOT NULL,
    PRIMARY KEY (name, revision)
);

-- The profile a deployment selects. The foreign key is the delete's guard (409 while a
-- deployment selects it); its check takes FOR KEY SHARE on the profile row, which a
-- profile's update (FOR NO KEY UPDATE) does not wait for.
ALTER TABLE desired_data_job_deployment
    ADD COLUMN execution_profile text NOT NULL DEFAULT 'default' REFERENCES execution_profile (name);
CREATE INDEX desired_data_job_deployment_profile ON desired_data_job_deployment (execution_profile);
