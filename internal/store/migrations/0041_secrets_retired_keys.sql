-- The keys a rotation retired (issue 41, L7). `datajobs secrets rotate` re-wrapped every
-- data key under the newest key and reported success while another replica, whose key
-- file was not updated yet (a mounted Secret lags), still wrapped new data keys under
-- the old one: the operator then removed the old key and those secrets no longer opened.
--
-- A rotation now retires every other key of its file first (store.RetireKeys, under a
-- lock that waits for the envelope writes in flight), then re-wraps. From then on the
-- trigger below refuses a data key newly wrapped under a retired key, whichever replica
-- writes it: the write fails as unavailable (SQLSTATE DJ001) until that replica reads the
-- new file, and no envelope under a retired key appears after the rotation's pass.
CREATE TABLE secrets_retired_key (
    key_id     text PRIMARY KEY,
    retired_at timestamptz NOT NULL DEFAULT now()
);

-- TG_ARGV[0] is the table's key id column. An update that keeps the row's key id (a row
-- the rotation has not re-wrapped yet) passes: the rotation re-wraps it after.
CREATE FUNCTION refuse_retired_key() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    k text := to_jsonb(NEW) ->> TG_ARGV[0];
BEGIN
    IF k = '' OR (TG_OP = 'UPDATE' AND k = to_jsonb(OLD) ->> TG_ARGV[0]) THEN
        RETURN NEW;
    END IF;
    IF EXISTS (SELECT 1 FROM secrets_retired_key WHERE key_id = k) THEN
        RAISE EXCEPTION 'a data key wrapped under the retired key %', k USING ERRCODE = 'DJ001',
            HINT = 'this replica''s secrets key file is older than the last rotation';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER job_secrets_retired_key BEFORE INSERT OR UPDATE ON job_secrets
    FOR EACH ROW EXECUTE FUNCTION refuse_retired_key('key_id');
CREATE TRIGGER team_oauth_credentials_retired_key BEFORE INSERT OR UPDATE ON team_oauth_credentials
    FOR EACH ROW EXECUTE FUNCTION refuse_retired_key('key_id');
CREATE TRIGGER team_webhook_retired_key BEFORE INSERT OR UPDATE ON team_webhook
    FOR EACH ROW EXECUTE FUNCTION refuse_retired_key('secret_key_id');
