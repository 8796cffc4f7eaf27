-- The change log of 0026 was pruned only by a leader in sync mode on, after its own reads:
-- with --sync-mode dry-run or off it grew forever, and a dry-run reader beside a leader
-- could lose a change the leader had read and deleted. Now every prune records how far it
-- deleted (pruned_below: every row below it may be gone, none at or above it is), in the
-- transaction that deletes, and a read whose cursor is below it reads everything instead
-- (store.LoadSyncChanges): a reader never misses a change, whoever pruned. Every replica,
-- in every mode, also expires the log by age (store.ExpireSyncChanges): mark_xid is the
-- xmin of a snapshot taken at mark_at; once mark_at is older than the retention the rows
-- below mark_xid go (all committed before mark_at) and a new mark is taken. Only a reader
-- that has not read since mark_at then falls back to a full read.
CREATE TABLE sync_change_horizon (
    singleton    boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    pruned_below xid8 NOT NULL DEFAULT '0',
    mark_xid     xid8,
    mark_at      timestamptz
);
INSERT INTO sync_change_horizon DEFAULT VALUES;
