-- Execution targets (issue 44): where a team's CronJobs and Jobs live, each driven by a
-- synchronizer shard of its own (its own lease row, informers and queues). The target
-- `default` is the namespace every installation drove before targets (serve's
-- --namespace), written by serve at start when missing, so an upgrade rewrites no CronJob.
CREATE TABLE execution_target (
    name              text PRIMARY KEY CHECK (name ~ '^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$'),
    namespace         text NOT NULL CHECK (namespace ~ '^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$'),
    -- The Secret (in the default target's namespace) whose `kubeconfig` key reaches another
    -- cluster; NULL is the cluster the service runs against.
    kubeconfig_secret text,
    -- The teams that may name the target in a deployment besides those it is the default
    -- for ('*': every team).
    teams             text[] NOT NULL DEFAULT '{}',
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now()
);
-- Two shards driving one namespace of one cluster would each delete the other's CronJobs.
CREATE UNIQUE INDEX execution_target_place_idx ON execution_target (coalesce(kubeconfig_secret, ''), namespace);

-- The target of a team's deployments: one row a team at most; a team without one is the
-- default target's.
CREATE TABLE execution_target_team (
    team   text PRIMARY KEY,
    target text NOT NULL REFERENCES execution_target (name) ON DELETE RESTRICT
);
CREATE INDEX execution_target_team_target_idx ON execution_target_team (target);

CREATE FUNCTION datajobs_target_of(t text) RETURNS text LANGUAGE sql STABLE AS
    $$ SELECT coalesce((SELECT target FROM execution_target_team WHERE team = t), 'default') $$;

-- A team that moves notes its jobs in the synchronizer's change log (0026, 0029's
-- function): the shard it left deletes their CronJobs, the one it joined creates them.
CREATE TRIGGER sync_change_insert AFTER INSERT ON execution_target_team REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION sync_change_note_team();
CREATE TRIGGER sync_change_delete AFTER DELETE ON execution_target_team REFERENCING OLD TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION sync_change_note_team();

-- Where a job's CronJob was last written, and where a run's Job lives: the shard of that
-- target keeps them. Existing rows are the default target's (a constant default: no
-- table rewrite).
ALTER TABLE actual_data_job_deployment ADD COLUMN target text NOT NULL DEFAULT 'default';
ALTER TABLE cronjob_intent ADD COLUMN target text NOT NULL DEFAULT 'default';
ALTER TABLE data_job_execution ADD COLUMN target text NOT NULL DEFAULT 'default';
-- A new run is its team's target's unless its writer names one (the tracker that saw its
-- Job): filled after data_job_execution_fill_job (triggers fire in name order) has the team.
ALTER TABLE data_job_execution ALTER COLUMN target DROP DEFAULT;
CREATE FUNCTION data_job_execution_fill_target() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.target := coalesce(NEW.target, datajobs_target_of(NEW.team));
    RETURN NEW;
END $$;
CREATE TRIGGER data_job_execution_fill_target BEFORE INSERT ON data_job_execution
    FOR EACH ROW EXECUTE FUNCTION data_job_execution_fill_target();
CREATE INDEX data_job_execution_target_active_idx ON data_job_execution (target)
    WHERE status IN ('submitted', 'running');

-- Every new term of any lease takes its epoch from one sequence, so that an epoch names
-- one term of one shard and a fenced write checks it without the lease's name.
CREATE SEQUENCE leader_lease_epoch;
SELECT setval('leader_lease_epoch', coalesce((SELECT max(epoch) FROM leader_lease), 0) + 1, false);

-- The change log position each shard has read up to (store.PruneSyncChanges): a shard
-- deletes the log only below the lowest of the shards that hold their leases, so one
-- shard's prune does not make the others read in full.
ALTER TABLE leader_lease ADD COLUMN sync_cursor bigint;

-- The replicas that run the synchronizer, each seen within a lease duration: the shards
-- are split fairly among them (store.ReplicaSeen, leader.Slots).
CREATE TABLE sync_replica (
    identity text PRIMARY KEY,
    seen_at  timestamptz NOT NULL DEFAULT now()
);
