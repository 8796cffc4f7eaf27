package store

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/datajobs/datajobs/internal/job"
)

// SyncCursor marks how far the synchronizer has read the change log (migration 0026):
// the xmin of the snapshot of its latest read, and the revision sequence's value then.
// Its zero value asks for a full read.
type SyncCursor struct {
	xmin     uint64
	revision int64
}

// IsZero reports whether c marks no read.
func (c SyncCursor) IsZero() bool { return c == SyncCursor{} }

// SyncChanges is one read of the synchronizer's states: every state (Full), or the states
// of the names whose rows changed since the cursor it was asked with.
type SyncChanges struct {
	// States are the states read: of every name with a row (Full), or of the changed names
	// that still have rows.
	States map[string]job.SyncState
	// Changed lists the names whose rows changed (nil when Full): a changed name missing
	// from States has no row left.
	Changed []string
	Full    bool
	// Cursor is the cursor of the next read.
	Cursor SyncCursor
	// Stale is true when the log holds rows the read asked with has already seen, for
	// PruneSyncChanges to delete.
	Stale bool
}

// LoadSyncChanges reads, in one snapshot, the states of the names changed since cursor
// since, or every state when since is zero, when the database went back behind it (its
// transaction ids or its revision sequence are lower than the cursor's: a restored backup,
// or another database at the same address), or when the log was pruned past it (its
// horizon, migration 0033, is above the cursor: rows this reader had not read may be
// gone). A change committed while it reads has a transaction id at or above the returned
// cursor's xmin: the next read returns it.
//
// Why no change is ever missed, whoever prunes: a read needs the rows at or above its
// cursor's xmin. Every prune deletes only rows below the horizon it sets, in the same
// transaction. If this read's snapshot sees that prune, it sees the horizon, and either
// the cursor is at or above it (no row it needs was deleted) or the read is full; if it
// does not, it sees the rows.
func (s *Store) LoadSyncChanges(ctx context.Context, since SyncCursor) (SyncChanges, error) {
	return s.loadSyncChanges(ctx, DefaultTarget, since)
}

// loadSyncChanges is LoadSyncChanges as target's shard sees the states (loadSyncStates).
func (s *Store) loadSyncChanges(ctx context.Context, target string, since SyncCursor) (SyncChanges, error) {
	var out SyncChanges
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var (
			xmin, horizon string
			changed       []string
			stale         bool
		)
		after := any(nil)
		if !since.IsZero() {
			after = strconv.FormatUint(since.xmin, 10)
		}
		// The first statement takes the transaction's snapshot: its xmin is the cursor.
		const q = `SELECT pg_snapshot_xmin(pg_current_snapshot())::text,
	(SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM data_job_revision_seq),
	ARRAY(SELECT DISTINCT data_job_name FROM sync_change WHERE $1::text IS NOT NULL AND changed_xid >= $1::text::xid8),
	EXISTS (SELECT 1 FROM sync_change WHERE $1::text IS NOT NULL AND changed_xid < $1::text::xid8),
	coalesce((SELECT pruned_below::text FROM sync_change_horizon), '0')`
		if err := tx.QueryRow(ctx, q, after).Scan(&xmin, &out.Cursor.revision, &changed, &stale, &horizon); err != nil {
			return err
		}
		x, err := strconv.ParseUint(xmin, 10, 64)
		if err != nil {
			return fmt.Errorf("snapshot xmin %q: %w", xmin, err)
		}
		h, err := strconv.ParseUint(horizon, 10, 64)
		if err != nil {
			return fmt.Errorf("change log horizon %q: %w", horizon, err)
		}
		out.Cursor.xmin, out.Stale = x, stale
		out.Full = since.IsZero() || x < since.xmin || out.Cursor.revision < since.revision || since.xmin < h
		if out.Full {
			out.States, err = loadSyncStates(ctx, tx, target, nil)
			return err
		}
		out.Changed = changed
		if len(changed) == 0 {
			out.States = map[string]job.SyncState{}
			return nil
		}
		out.States, err = loadSyncStates(ctx, tx, target, changed)
		return err
	})
	if err != nil {
		return SyncChanges{}, translate(fmt.Errorf("load changed sync states: %w", err))
	}
	return out, nil
}

// PruneSyncChanges deletes the change log's rows older than cursor before, which every
// read that returned before (and any later one) has seen, and raises the log's horizon to
// before in the same statement, so that another reader whose cursor is older (a dry run
// beside the leader) reads in full instead of missing them. With several shards
// (targets.go), each records its cursor in its lease row and the log is deleted only below
// the lowest cursor of the shards that hold their leases (none while one has not recorded
// its first): one shard's prune never makes another read in full. It deletes only while
// fence's term holds its lease: a deposed leader whose passes run on would make the new
// leader's reads full for nothing. It returns the rows deleted.
func (s *Store) PruneSyncChanges(ctx context.Context, fence job.Fence, before SyncCursor) (int64, error) {
	if before.IsZero() {
		return 0, nil
	}
	q := `WITH me AS (
	UPDATE leader_lease SET sync_cursor = $1 WHERE epoch = $2 AND expires_at > now() AND ` + syncLeases + ` RETURNING 1
), lim AS (
	SELECT (CASE WHEN bool_or(sync_cursor IS NULL AND epoch <> $2) THEN NULL
		ELSE least($1, min(sync_cursor) FILTER (WHERE epoch <> $2)) END)::text::xid8 AS below
	FROM leader_lease WHERE expires_at > now() AND ` + syncLeases + `
), d AS (
	DELETE FROM sync_change WHERE changed_xid < (SELECT below FROM lim) AND ` + syncLeaseHeld("$2") + ` RETURNING 1
), h AS (
	UPDATE sync_change_horizon SET pruned_below = greatest(pruned_below, (SELECT below FROM lim)) WHERE EXISTS (SELECT 1 FROM d)
)
SELECT count(*) FROM d`
	var n int64
	if err := s.pool.QueryRow(ctx, q, int64(before.xmin), fence.Epoch).Scan(&n); err != nil {
		return 0, translate(fmt.Errorf("prune the sync change log: %w", err))
	}
	return n, nil
}

// ExpireSyncChanges bounds the change log by age, whatever the sync mode and whoever
// reads it (migration 0033): every replica calls it now and then. Once the mark taken by
// an earlier call is older than retention, by the database's clock, it deletes the rows
// below the mark's xmin (committed before the mark was taken), raises the horizon to it,
// and takes a new mark; the first call only takes a mark. So the log keeps between one
// and two retentions of changes (plus the time between calls), and a reader falls back to
// a full read only when it has not read since the mark was taken: a reader's cursor is
// the xmin of its latest snapshot, which is at or above any xmin taken before. It returns
// the rows deleted.
func (s *Store) ExpireSyncChanges(ctx context.Context, retention time.Duration) (int64, error) {
	var deleted int64
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		var (
			mark *string
			due  bool
		)
		// The row lock orders replicas expiring at once; each then sees the other's mark.
		err := tx.QueryRow(ctx, `SELECT mark_xid::text, coalesce(mark_at <= now() - make_interval(secs => $1), false)
FROM sync_change_horizon FOR UPDATE`, retention.Seconds()).Scan(&mark, &due)
		if err != nil || (mark != nil && !due) {
			return err
		}
		if mark != nil {
			tag, err := tx.Exec(ctx, `DELETE FROM sync_change WHERE changed_xid < $1::text::xid8`, *mark)
			if err != nil {
				return err
			}
			deleted = tag.RowsAffected()
		}
		_, err = tx.Exec(ctx, `UPDATE sync_change_horizon SET pruned_below = greatest(pruned_below, coalesce($1::text::xid8, pruned_below)),
	mark_xid = pg_snapshot_xmin(pg_current_snapshot()), mark_at = now()`, mark)
		return err
	})
	if err != nil {
		return 0, translate(fmt.Errorf("expire the sync change log: %w", err))
	}
	return deleted, nil
}
