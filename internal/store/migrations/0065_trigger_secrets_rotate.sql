-- A trigger's signing secret is an envelope like a webhook's (issue 42): `datajobs secrets
-- rotate` re-wraps it (store.envelopeTables), and since 0050 nothing did, so an operator who
-- removed the old key after a rotation's success broke every signed trigger made before
-- it. A data key newly wrapped under a retired key is refused here as in the other
-- envelope tables (0041); only a write of the key id column fires it.
CREATE TRIGGER job_trigger_retired_key BEFORE INSERT OR UPDATE OF secret_key_id ON job_trigger
    FOR EACH ROW EXECUTE FUNCTION refuse_retired_key('secret_key_id');
