package server

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/datajobs/datajobs/internal/store"
)

// boundLogs bounds the tables that only grow, until ctx ends: the synchronizer's change
// log by age, in every sync mode: only a leader in mode on prunes what its passes read, so with dry-run or off
// on every replica the log grew forever (issue 28). Every replica runs it; the store
// orders them and keeps every reader correct (store.ExpireSyncChanges). It calls four
// times a retention, at most once a minute, and then folds the jobs list's count deltas
// (store.CompactJobListCounts), which every job creation, deletion, enable, disable or
// reschedule appends to.
func boundLogs(ctx context.Context, db *store.Store, retention time.Duration, log *slog.Logger) {
	retention = cmp.Or(retention, 10*time.Minute)
	tick := time.NewTicker(max(min(retention/4, time.Minute), 10*time.Millisecond))
	defer tick.Stop()
	for {
		if n, err := db.ExpireSyncChanges(ctx, retention); err != nil && ctx.Err() == nil {
			log.WarnContext(ctx, "sync_change_expire_failed", "error", err)
		} else if n > 0 {
			log.DebugContext(ctx, "sync_change_expired", "rows", n)
		}
		if n, err := db.CompactJobListCounts(ctx); err != nil && ctx.Err() == nil {
			log.WarnContext(ctx, "job_list_counts_compact_failed", "error", err)
		} else if n > 0 {
			log.DebugContext(ctx, "job_list_counts_compacted", "rows", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
