package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testenv"
)

// The incremental read must not lose a change that was committed after a read although
// its transaction began before it, even when a later transaction of another name was
// seen by that read (a cursor of "the highest change seen" would skip it), and must
// report a deleted job as changed and gone.
func TestLoadSyncChangesReturnsAChangeCommittedDuringTheReadBeforeAndADeletedJob(t *testing.T) {
	t.Parallel()
	st, ctx, url := openStore(t)
	for _, name := range []string{"early", "late", "gone", "still"} {
		deployVersion(t, st, name, "v1")
	}
	full, err := st.LoadSyncChanges(ctx, store.SyncCursor{})
	require.NoError(t, err)
	require.True(t, full.Full)
	require.Len(t, full.States, 4)
	// The cursor is the oldest transaction of the whole PostgreSQL cluster still running
	// when the read began: with other databases' writers (the parallel tests) it may lag,
	// and a read may return names it returned before, never fewer.
	quiet, err := st.LoadSyncChanges(ctx, full.Cursor)
	require.NoError(t, err)
	require.False(t, quiet.Full)

	// "early" changes in a transaction that begins first and commits last; "late" in one
	// that begins after it and commits before the read.
	early := connect(t, url)
	tx, err := early.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `UPDATE data_job SET description = 'early change' WHERE name = 'early'`)
	require.NoError(t, err)
	_, err = connect(t, url).Exec(ctx, `UPDATE data_job SET description = 'late change' WHERE name = 'late'`)
	require.NoError(t, err)
	during, err := st.LoadSyncChanges(ctx, quiet.Cursor)
	require.NoError(t, err)
	require.Contains(t, during.Changed, "late")
	require.Equal(t, "late change", during.States["late"].Job.Description)
	if st, ok := during.States["early"]; ok { // a lagging cursor reads it again
		require.NotEqual(t, "early change", st.Job.Description, "not committed yet")
	}
	require.NoError(t, tx.Commit(ctx))

	require.NoError(t, st.DeleteJob(ctx, "team-a", "gone"))
	next, err := st.LoadSyncChanges(ctx, during.Cursor)
	require.NoError(t, err)
	require.False(t, next.Full)
	require.Contains(t, next.Changed, "early", "the change committed after the previous read began is read now")
	require.Equal(t, "early change", next.States["early"].Job.Description)
	require.Contains(t, next.Changed, "gone")
	require.NotContains(t, next.States, "gone", "a deleted job is changed and has no state")
}

// Pruning never forgets what a later read still has to return, and deletes only while the
// leader's term holds the lease: a deposed leader whose passes run on must not delete rows
// the new leader has yet to read.
func TestPruneSyncChangesDeletesOnlyWhatWasReadAndOnlyUnderTheLease(t *testing.T) {
	t.Parallel()
	st, ctx, url := openStore(t)
	epoch, ok, err := st.TryAcquireLease(ctx, store.SyncLeaseName, "a", time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	deployVersion(t, st, "one", "v1")
	first, err := st.LoadSyncChanges(ctx, store.SyncCursor{})
	require.NoError(t, err)
	deployVersion(t, st, "one", "v2")
	second, err := st.LoadSyncChanges(ctx, first.Cursor)
	require.NoError(t, err)
	require.Contains(t, second.Changed, "one")

	count := func() (n int) {
		require.NoError(t, connect(t, url).QueryRow(ctx, `SELECT count(*) FROM sync_change`).Scan(&n))
		return n
	}
	logged := count()
	n, err := st.PruneSyncChanges(ctx, job.Fence{Epoch: epoch + 1}, second.Cursor)
	require.NoError(t, err)
	require.Zero(t, n, "a term that does not hold the lease deletes nothing")
	require.Equal(t, logged, count())
	n, err = st.PruneSyncChanges(ctx, job.Fence{Epoch: epoch}, first.Cursor)
	require.NoError(t, err)
	require.Equal(t, logged-int(n), count())
	third, err := st.LoadSyncChanges(ctx, first.Cursor)
	require.NoError(t, err)
	require.Equal(t, second.Changed, third.Changed, "what the read after the cursor returns is kept")
}

// openStore opens a store on a fresh database, and returns the database's URL too.
func openStore(t *testing.T) (*store.Store, context.Context, string) {
	t.Helper()
	url := testenv.DatabaseURL(t)
	st, err := store.Open(t.Context(), store.Config{URL: url})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	return st, t.Context(), url
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// A team's credentials are an input of its jobs' states (job.Job.TeamOAuth): adding or
// removing them must bring every job of that team into the next incremental read. Without the triggers of migration 0029 the read returned no name and
// the team's CronJobs kept rendering without the Secret reference until the hourly full read.
func TestLoadSyncChangesReturnsTheJobsOfATeamWhoseCredentialsCameOrWent(t *testing.T) {
	t.Parallel()
	st, ctx, url := openStore(t)
	deployVersion(t, st, "oauth-a", "v1")
	_, err := st.CreateJob(ctx, job.Job{Name: "oauth-b", Team: "team-b"})
	require.NoError(t, err)
	full, err := st.LoadSyncChanges(ctx, store.SyncCursor{})
	require.NoError(t, err)
	require.False(t, full.States["oauth-a"].Job.TeamOAuth)

	db := connect(t, url)
	_, err = db.Exec(ctx, `INSERT INTO team_oauth_credentials (team, client_id, key_id, data_key, client_secret) VALUES ('team-a', 'c', 'k', '\x00', '\x00')`)
	require.NoError(t, err)
	came, err := st.LoadSyncChanges(ctx, full.Cursor)
	require.NoError(t, err)
	require.False(t, came.Full)
	require.Contains(t, came.Changed, "oauth-a")
	require.True(t, came.States["oauth-a"].Job.TeamOAuth, "read again, with the credentials")

	_, err = db.Exec(ctx, `DELETE FROM team_oauth_credentials WHERE team = 'team-a'`)
	require.NoError(t, err)
	went, err := st.LoadSyncChanges(ctx, came.Cursor)
	require.NoError(t, err)
	require.Contains(t, went.Changed, "oauth-a")
	require.False(t, went.States["oauth-a"].Job.TeamOAuth, "read again, without them")
}
