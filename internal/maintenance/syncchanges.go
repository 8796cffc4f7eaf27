package maintenance

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/datajobs/datajobs/internal/job"
)

// The tables that only grow (issue 28): the synchronizer's change log, which every write
// of a job appends to, and the jobs list's count deltas, which every job creation,
// deletion, enable, disable or reschedule appends to. Only a leader in sync mode on
// prunes what its passes read, so with dry-run or off on every replica the log grew
// forever: this service is the one that runs on every replica, not under the lease, and
// writes nothing a fence guards. The store orders the replicas and keeps every reader
// correct (store.ExpireSyncChanges).

// SyncChangeRetentionDefault is how long the change log keeps a change.
const SyncChangeRetentionDefault = 10 * time.Minute

// SyncChangesConfig configures the bound of the change log.
type SyncChangesConfig struct {
	// Retention is how long a change is kept (default SyncChangeRetentionDefault); the
	// service runs four times a retention, at most once a minute.
	Retention time.Duration
}

// syncChangesStore is what the bound deletes from and folds.
type syncChangesStore interface {
	ExpireSyncChanges(ctx context.Context, retention time.Duration) (int64, error)
	CompactJobListCounts(ctx context.Context) (int64, error)
}

// SyncChanges bounds the change log by age, then folds the jobs list's count deltas.
type SyncChanges struct {
	cfg SyncChangesConfig
	db  syncChangesStore
}

// NewSyncChanges returns the bound of the change log.
func NewSyncChanges(cfg SyncChangesConfig, db syncChangesStore) *SyncChanges {
	cfg.Retention = cmp.Or(cfg.Retention, SyncChangeRetentionDefault)
	return &SyncChanges{cfg: cfg, db: db}
}

// Service is the service as a Maintainer runs it: at once, then four times a retention,
// at most once a minute.
func (s *SyncChanges) Service() Service {
	period := max(min(s.cfg.Retention/4, time.Minute), 10*time.Millisecond)
	return Service{Name: "sync_change_bound", Period: period, AtStart: true, RunOnce: s.runOnce}
}

// runOnce expires the change log and compacts the count deltas; a failure of one does
// not keep the other from running. It needs no fence: every replica may run it.
func (s *SyncChanges) runOnce(ctx context.Context, _ job.Fence) (Counts, error) {
	expired, expireErr := s.db.ExpireSyncChanges(ctx, s.cfg.Retention)
	if expireErr != nil {
		expireErr = fmt.Errorf("expire sync changes: %w", expireErr)
	}
	compacted, compactErr := s.db.CompactJobListCounts(ctx)
	if compactErr != nil {
		compactErr = fmt.Errorf("compact job list counts: %w", compactErr)
	}
	return Counts{"sync_changes_expired": int(expired), "job_list_counts_compacted": int(compacted)},
		errors.Join(expireErr, compactErr)
}
