-- The incarnation of a job name that first ran each prebuilt image (issue 41, L9). A
-- prebuilt image is looked up by its tag, <registry>/<job>:<version>, and the tag outlives
-- the job: a job deleted and created again under its name (by another team, say) that
-- deployed a version the previous job had pushed ran the previous owner's image, with
-- the new job's secrets and identity. The synchronizer records here, by digest, which
-- incarnation ran an image first (store.ClaimPrebuiltImage) and refuses it to any other.
--
-- Rows outlive their job on purpose (no cascade): they are what remembers the previous
-- owner. One row per distinct image a job name ever resolved: as many as its deploys of
-- new prebuilt versions at most.
CREATE TABLE prebuilt_image_owner (
    job_name    text NOT NULL,
    -- <registry>/<job>@sha256:<hex>, as the CronJob runs it.
    image       text NOT NULL,
    job_uid     uuid NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_name, image)
);

-- The prebuilt images the jobs of today run are theirs (a sources build has a base image).
INSERT INTO prebuilt_image_owner (job_name, image, job_uid)
SELECT i.job_name, i.image, j.uid FROM data_job_image i JOIN data_job j ON j.name = i.job_name
WHERE i.base_image = ''
ON CONFLICT DO NOTHING;
