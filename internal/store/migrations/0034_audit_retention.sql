-- The audit log's bound and retention (issue 41, M1). Any team member could fill the
-- database's disk through it: every row kept the whole request path (a 64 KiB path made a
-- 124 KiB row, 404s included) and nothing was ever deleted.
--
-- Each row is bounded: the service cuts the path and the names it keeps (store.RecordAudit)
-- and the API refuses over-long paths before routing; the CHECK below makes a row that
-- is not cut an error instead of disk (NOT VALID: rows written before stay as they are).
ALTER TABLE audit_log ADD CONSTRAINT audit_log_row_bounded CHECK (
    octet_length(path) <= 1100 AND octet_length(job_name) <= 300 AND octet_length(actor) <= 300
    AND octet_length(team) <= 300 AND octet_length(op_id) <= 300 AND octet_length(route) <= 300
) NOT VALID;

-- The log stays append-only between retention cuts. A DELETE is let through only in a
-- transaction that set datajobs.audit_retention to 'cut' (set_config(..., true): for that
-- transaction alone), which only the store's retention statement does
-- (store.DeleteExpiredAudit). Chosen over partitions dropped by age: the table, its
-- identity key and its readers stay as they are, and a cut by count per team (which
-- partitions by time cannot make) is one statement. UPDATE and TRUNCATE stay refused
-- whatever the setting, so a bug of the service still cannot rewrite a row or empty the
-- log; an operator who must do more drops the trigger on purpose, as its owner.
CREATE OR REPLACE FUNCTION audit_log_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('datajobs.audit_retention', true) = 'cut' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'audit_log is append-only: % refused', TG_OP USING ERRCODE = 'insufficient_privilege';
END
$$;

-- The retention cuts by age and by count per team (newest kept): the index serves both.
CREATE INDEX audit_log_created_at ON audit_log (created_at);
