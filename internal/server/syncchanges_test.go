package server_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/server"
	"github.com/datajobs/datajobs/internal/testenv"
)

// Issue 28: the synchronizer's change log was pruned only by a leader in sync mode on, so
// on a database served only in dry-run or off mode every write to a job added rows that
// stayed forever. Every replica now expires it (here after 200 ms instead of 10 minutes).
func TestTheSyncChangeLogIsBoundedWithoutALeader(t *testing.T) {
	t.Parallel()
	for _, mode := range []server.SyncMode{server.SyncOff, server.SyncDryRun} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			dbURL := testenv.DatabaseURL(t)
			base, _, _ := serve(t, server.Config{DatabaseURL: dbURL, SyncMode: mode, SyncChangeRetention: 200 * time.Millisecond})
			require.Eventually(t, func() bool { code, _ := get(t, base+"/readyz"); return code == http.StatusOK }, 30*time.Second, 50*time.Millisecond)
			// The expiry waits for this transaction's lock meanwhile, so the rows are seen.
			conn, err := pgx.Connect(t.Context(), dbURL)
			require.NoError(t, err)
			defer conn.Close(context.Background())
			hold, err := conn.Begin(t.Context())
			require.NoError(t, err)
			_, err = hold.Exec(t.Context(), `SELECT 1 FROM sync_change_horizon FOR UPDATE`)
			require.NoError(t, err)
			require.Equal(t, http.StatusCreated, post(t, base+"/data-jobs/for-team/team-a/jobs",
				`{"job_name":"logged-job","team":"team-a","description":"d","config":{"schedule":{"schedule_cron":"0 * * * *"}}}`))
			require.Equal(t, http.StatusAccepted, post(t, base+"/data-jobs/for-team/team-a/jobs/logged-job/deployments", `{"job_version":"v1"}`))

			watch, err := pgx.Connect(t.Context(), dbURL)
			require.NoError(t, err)
			defer watch.Close(context.Background())
			rows := func() (n int) {
				require.NoError(t, watch.QueryRow(t.Context(), `SELECT count(*) FROM sync_change WHERE data_job_name = 'logged-job'`).Scan(&n))
				return n
			}
			require.Positive(t, rows(), "the writes were logged")
			require.NoError(t, hold.Rollback(t.Context()))
			require.Eventually(t, func() bool { return rows() == 0 }, time.Minute, 50*time.Millisecond, "the rows expired")
		})
	}
}
