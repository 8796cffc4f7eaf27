package synchronizer

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
)

// A pass that queues a flood of creates keeps at most PrefetchLimit of their states (some
// KiB each), whatever the flood: the in-flight objects of the sync queue are bounded.
func TestPrefetchHoldsAtMostTheLimit(t *testing.T) {
	t.Parallel()
	tm := &term{s: New(Config{PrefetchLimit: 3}, nil, nil, nil), prefetched: map[string]Plan{}, notified: map[string]int64{}}
	since := tm.beginPass()
	for i := range 100 {
		name := fmt.Sprintf("job-%03d", i)
		st := job.SyncState{Name: name, Job: &job.Job{Name: name}, Desired: &job.Deployment{}}
		tm.prefetch(Plan{Name: name, Action: ActionCreate, State: st}, since)
	}
	require.Len(t, tm.prefetched, 3)
	tm.notify("job-200")
	tm.beginPass()
	require.Empty(t, tm.prefetched, "a pass starts afresh")
	require.Empty(t, tm.notified, "notified names are forgotten at each pass")
}
