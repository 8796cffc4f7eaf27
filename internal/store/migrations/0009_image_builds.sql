-- Images built by the synchronizer's builder (docs/builder.md): one row per job version,
-- python version and base image reference built, with the pushed image by digest. A row
-- is written once the push succeeded; a deployment whose inputs have a row is never built
-- or pushed again, and its CronJob runs that image.
--
-- Rows go with their job (cascade): a job created again under the same name builds anew.

CREATE TABLE data_job_image (
    job_name            text NOT NULL REFERENCES data_job (name) ON DELETE CASCADE,
    -- The stored sources version built (the deployment's job version).
    job_version         text NOT NULL,
    python_version      text NOT NULL,
    -- The configured base image reference, and the digest it resolved to for this build.
    base_image          text NOT NULL,
    base_digest         text NOT NULL,
    -- SHA-256 of requirements.txt ('' without one).
    requirements_sha256 text NOT NULL DEFAULT '',
    -- <registry>/<job>@sha256:<hex>: what the CronJob runs.
    image               text NOT NULL,
    bytes_pushed        bigint NOT NULL DEFAULT 0,
    built_at            timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_name, job_version, python_version, base_image)
);

-- A deployment being built shows 'building'.
ALTER TABLE desired_data_job_deployment DROP CONSTRAINT desired_data_job_deployment_status_check;
ALTER TABLE desired_data_job_deployment ADD CONSTRAINT desired_data_job_deployment_status_check
    CHECK (status IN ('pending', 'synced', 'user_error', 'platform_error', 'building'));
