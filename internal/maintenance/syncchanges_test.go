package maintenance

import (
	"cmp"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
)

// syncChangesDB expires and compacts what the test says, and records the retention asked.
type syncChangesDB struct {
	expired, compacted       int64
	expireErr, compactErr    error
	retention                time.Duration
	expireCalls, compactions int
}

func (d *syncChangesDB) ExpireSyncChanges(_ context.Context, retention time.Duration) (int64, error) {
	d.retention, d.expireCalls = retention, d.expireCalls+1
	return d.expired, d.expireErr
}

func (d *syncChangesDB) CompactJobListCounts(context.Context) (int64, error) {
	d.compactions++
	return d.compacted, d.compactErr
}

func TestSyncChangesRunOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		retention  time.Duration
		db         syncChangesDB
		period     time.Duration
		counts     Counts
		errContain string
	}{{
		name:   "the log is expired by the default retention, four times a retention at most once a minute, and the counts folded",
		db:     syncChangesDB{expired: 12, compacted: 3},
		period: time.Minute, counts: Counts{"sync_changes_expired": 12, "job_list_counts_compacted": 3},
	}, {
		name: "a short retention runs four times a retention", retention: 200 * time.Millisecond,
		period: 50 * time.Millisecond, counts: Counts{"sync_changes_expired": 0, "job_list_counts_compacted": 0},
	}, {
		name:   "a failed expiry still compacts the counts",
		db:     syncChangesDB{expireErr: errors.New("lock timeout"), compacted: 2},
		period: time.Minute, counts: Counts{"sync_changes_expired": 0, "job_list_counts_compacted": 2}, errContain: "expire sync changes: lock timeout",
	}, {
		name:   "a failed compaction is the run's error, the expiry done",
		db:     syncChangesDB{expired: 4, compactErr: errors.New("gone")},
		period: time.Minute, counts: Counts{"sync_changes_expired": 4, "job_list_counts_compacted": 0}, errContain: "compact job list counts: gone",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := tc.db
			s := NewSyncChanges(SyncChangesConfig{Retention: tc.retention}, &db)
			require.Equal(t, tc.period, s.Service().Period)
			counts, err := s.runOnce(t.Context(), job.Fence{})
			requireRun(t, tc.counts, tc.errContain, counts, err)
			require.Equal(t, 1, db.expireCalls)
			require.Equal(t, 1, db.compactions)
			require.Equal(t, cmp.Or(tc.retention, SyncChangeRetentionDefault), db.retention, "expired by the retention")
		})
	}
}
