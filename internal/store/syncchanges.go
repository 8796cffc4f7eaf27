package store

import (
	"context"
	"fmt"
	"strconv"

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
// since, or every state when since is zero or the database went back behind it (its
// transaction ids or its revision sequence are lower than the cursor's: a restored backup,
// or another database at the same address). A change committed while it reads has a
// transaction id at or above the returned cursor's xmin: the next read returns it.
func (s *Store) LoadSyncChanges(ctx context.Context, since SyncCursor) (SyncChanges, error) {
	var out SyncChanges
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var (
			xmin    string
			changed []string
			stale   bool
		)
		after := any(nil)
		if !since.IsZero() {
			after = strconv.FormatUint(since.xmin, 10)
		}
		// The first statement takes the transaction's snapshot: its xmin is the cursor.
		const q = `SELECT pg_snapshot_xmin(pg_current_snapshot())::text,
	(SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM data_job_revision_seq),
	ARRAY(SELECT DISTINCT data_job_name FROM sync_change WHERE $1::text IS NOT NULL AND changed_xid >= $1::text::xid8),
	EXISTS (SELECT 1 FROM sync_change WHERE $1::text IS NOT NULL AND changed_xid < $1::text::xid8)`
		if err := tx.QueryRow(ctx, q, after).Scan(&xmin, &out.Cursor.revision, &changed, &stale); err != nil {
			return err
		}
		x, err := strconv.ParseUint(xmin, 10, 64)
		if err != nil {
			return fmt.Errorf("snapshot xmin %q: %w", xmin, err)
		}
		out.Cursor.xmin, out.Stale = x, stale
		out.Full = since.IsZero() || x < since.xmin || out.Cursor.revision < since.revision
		if out.Full {
			out.States, err = loadSyncStates(ctx, tx, nil)
			return err
		}
		out.Changed = changed
		if len(changed) == 0 {
			out.States = map[string]job.SyncState{}
			return nil
		}
		out.States, err = loadSyncStates(ctx, tx, changed)
		return err
	})
	if err != nil {
		return SyncChanges{}, translate(fmt.Errorf("load changed sync states: %w", err))
	}
	return out, nil
}

// PruneSyncChanges deletes the change log's rows older than cursor before, which every
// read that returned before (and any later one) has seen, while fence's term holds the
// lease: a deposed leader whose passes run on must not delete what the new leader has not
// read. It returns the rows deleted.
func (s *Store) PruneSyncChanges(ctx context.Context, fence job.Fence, before SyncCursor) (int64, error) {
	if before.IsZero() {
		return 0, nil
	}
	q := `DELETE FROM sync_change WHERE changed_xid < $1::text::xid8 AND ` + syncLeaseHeld("$2")
	tag, err := s.pool.Exec(ctx, q, strconv.FormatUint(before.xmin, 10), fence.Epoch)
	if err != nil {
		return 0, translate(fmt.Errorf("prune the sync change log: %w", err))
	}
	return tag.RowsAffected(), nil
}
