-- Uploaded sources of data jobs (VDK's POST .../jobs/{job}/sources), content-addressed:
-- version_sha is derived from the files in the archive, so the same files uploaded
-- again give the same version. The archive is kept as uploaded, for download.
--
-- Sources go with their job (cascade): a job created again under the same name starts
-- without any.

CREATE SEQUENCE data_job_source_upload_seq;

CREATE TABLE data_job_source (
    job_name    text NOT NULL REFERENCES data_job (name) ON DELETE CASCADE,
    version_sha text NOT NULL,
    -- The zip archive as first uploaded with this content.
    archive     bytea NOT NULL,
    size_bytes  bigint NOT NULL,
    -- The upload order: the latest version of a job has the largest. An upload of
    -- content already stored takes a new number, so it becomes the latest again.
    upload_seq  bigint NOT NULL DEFAULT nextval('data_job_source_upload_seq'),
    reason      text NOT NULL DEFAULT '',
    uploaded_by text NOT NULL DEFAULT '',
    uploaded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_name, version_sha)
);
CREATE INDEX data_job_source_latest_idx ON data_job_source (job_name, upload_seq DESC);

-- Zip archives are compressed already: store them out of line without trying again.
ALTER TABLE data_job_source ALTER COLUMN archive SET STORAGE EXTERNAL;
