-- Secrets of jobs and OAuth credentials of teams (issue 26), encrypted at rest by envelope
-- encryption (internal/secrets): each row holds its own random data key wrapped by the
-- keyring key key_id, and its values sealed by that data key (AES-256-GCM, bound to the
-- job's UID or the team's name). Nothing here is readable without the keyring file.
--
-- A job's secrets go with the job's row (cascade on its UID): unlike VDK, a job re-created
-- with the same name starts without secrets; a team change keeps the UID, so keeps them.
CREATE TABLE job_secrets (
    job_uid     uuid PRIMARY KEY REFERENCES data_job (uid) ON DELETE CASCADE,
    key_id      text NOT NULL,
    data_key    bytea NOT NULL,
    secrets     bytea NOT NULL,
    updated_by  text NOT NULL DEFAULT '',
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX job_secrets_key_id ON job_secrets (key_id);

-- VDK's team OAuth credentials: the client id is not secret (VDK answers it to any
-- member, and maps client ids to teams); the client secret is sealed.
CREATE TABLE team_oauth_credentials (
    team          text PRIMARY KEY,
    client_id     text NOT NULL,
    key_id        text NOT NULL,
    data_key      bytea NOT NULL,
    client_secret bytea NOT NULL,
    updated_by    text NOT NULL DEFAULT '',
    updated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX team_oauth_credentials_client_id ON team_oauth_credentials (client_id);
CREATE INDEX team_oauth_credentials_key_id ON team_oauth_credentials (key_id);
