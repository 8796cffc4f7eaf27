package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/store"
)

// logged counts the change log's rows of name.
func logged(t *testing.T, ctx context.Context, url, name string) (n int) {
	t.Helper()
	require.NoError(t, connect(t, url).QueryRow(ctx, `SELECT count(*) FROM sync_change WHERE data_job_name = $1`, name).Scan(&n))
	return n
}

// Issue 28: a reader beside the leader (a dry run on the same database) kept its own
// cursor, and the leader deleted the rows of a change the reader had not read yet: the
// reader's next incremental read did not return it, and its plan went on showing the old
// version until its hourly full read. The prune now raises the log's horizon, and a read
// whose cursor is below it reads every state.
func TestAReaderWhoseUnreadChangesAnotherPrunedReadsInFull(t *testing.T) {
	t.Parallel()
	st, ctx, url := openStore(t)
	epoch, ok, err := st.TryAcquireLease(ctx, store.SyncLeaseName, "leader", time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	deployVersion(t, st, "one", "v1")
	dryRun, err := st.LoadSyncChanges(ctx, store.SyncCursor{})
	require.NoError(t, err)
	deployVersion(t, st, "one", "v2") // the dry run has not read this yet

	leader, err := st.LoadSyncChanges(ctx, store.SyncCursor{})
	require.NoError(t, err)
	// The cursor follows the whole cluster's oldest transaction (other tests'): read and
	// prune until the change's rows are gone.
	require.Eventually(t, func() bool {
		next, err := st.LoadSyncChanges(ctx, leader.Cursor)
		require.NoError(t, err)
		_, err = st.PruneSyncChanges(ctx, job.Fence{Epoch: epoch}, next.Cursor)
		require.NoError(t, err)
		leader = next
		return logged(t, ctx, url, "one") == 0
	}, time.Minute, 20*time.Millisecond)

	got, err := st.LoadSyncChanges(ctx, dryRun.Cursor)
	require.NoError(t, err)
	require.True(t, got.Full, "the rows it needed are gone: it reads everything")
	require.Equal(t, "v2", got.States["one"].Desired.JobVersion)
	mine, err := st.LoadSyncChanges(ctx, leader.Cursor)
	require.NoError(t, err)
	require.False(t, mine.Full, "the pruner's own cursor is at the horizon: its reads stay incremental")
}

// Issue 28: only a leader in mode on pruned the log, so with every replica in dry-run or
// off it grew forever. ExpireSyncChanges, which every replica calls, deletes what is older
// than a mark taken a retention before (here 0: the previous call), and never makes a
// reader miss a change: one that read before the change it deleted reads in full, one
// that read after the mark stays incremental, and both get every change.
func TestExpiringTheLogBoundsItAndNoReaderMissesAChange(t *testing.T) {
	t.Parallel()
	st, ctx, url := openStore(t)
	deployVersion(t, st, "old", "v1")
	before, err := st.LoadSyncChanges(ctx, store.SyncCursor{})
	require.NoError(t, err)
	deployVersion(t, st, "old", "v2") // the reader "before" has not read this yet
	n, err := st.ExpireSyncChanges(ctx, time.Hour)
	require.NoError(t, err)
	require.Zero(t, n, "the first call only takes a mark")
	n, err = st.ExpireSyncChanges(ctx, time.Hour)
	require.NoError(t, err)
	require.Zero(t, n, "nothing is older than the retention")
	require.Positive(t, logged(t, ctx, url, "old"))

	// Expire (retention 0: each call deletes below the previous call's mark) until the
	// rows of "old" are gone; the mark follows the cluster's oldest transaction.
	require.Eventually(t, func() bool {
		_, err := st.ExpireSyncChanges(ctx, 0)
		require.NoError(t, err)
		return logged(t, ctx, url, "old") == 0
	}, time.Minute, 20*time.Millisecond, "the log is bounded with no leader pruning it")
	after, err := st.LoadSyncChanges(ctx, store.SyncCursor{}) // a reader that read after the mark
	require.NoError(t, err)
	deployVersion(t, st, "new", "v1")
	_, err = st.ExpireSyncChanges(ctx, time.Hour) // not due: the new change stays
	require.NoError(t, err)

	stale, err := st.LoadSyncChanges(ctx, before.Cursor)
	require.NoError(t, err)
	require.True(t, stale.Full, "the row of a change it had not read went: it reads everything")
	require.Contains(t, stale.States, "old")
	require.Equal(t, "v2", stale.States["old"].Desired.JobVersion)
	require.Contains(t, stale.States, "new")
	fresh, err := st.LoadSyncChanges(ctx, after.Cursor)
	require.NoError(t, err)
	require.False(t, fresh.Full)
	require.Contains(t, fresh.Changed, "new")
	require.Equal(t, "v1", fresh.States["new"].Desired.JobVersion)
}
