-- The identity of this installation: one row, created with the schema. Every object the
-- synchronizer creates carries it as the label datajobs.io/installation, and it prunes and
-- adopts only objects that carry it, so two installations sharing a namespace (or one
-- pointed at a fresh or restored database) never touch each other's CronJobs.
CREATE TABLE installation (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    singleton  boolean NOT NULL DEFAULT true UNIQUE CHECK (singleton),
    created_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO installation DEFAULT VALUES;

-- The UID of the CronJob the synchronizer last applied or verified, with its generation:
-- an object deleted and re-created (kubectl replace --force) restarts at generation 1, so
-- the generation alone cannot tell that it is untouched.
ALTER TABLE actual_data_job_deployment ADD COLUMN cronjob_uid text NOT NULL DEFAULT '';

-- The fingerprint of the rendering configuration (namespace, image registry, defaults)
-- of the leader that last synchronized: a leader with another one refuses to sync until
-- told to accept the change.
ALTER TABLE leader_lease ADD COLUMN config_fingerprint text NOT NULL DEFAULT '';
