package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/devenv"
	"github.com/datajobs/datajobs/internal/server"
	"github.com/datajobs/datajobs/internal/testenv"
)

type readyBody struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks"`
}

func readyz(t *testing.T, url string) (int, readyBody) {
	t.Helper()
	code, body := get(t, url+"/readyz")
	var b readyBody
	require.NoError(t, json.Unmarshal([]byte(body), &b), body)
	return code, b
}

// Attack (issue 22, item 7): the public probes quoted the database's error, which names
// its host, port and user to anyone who can reach the API. They now say which dependency
// fails; the error text stays on the admin listener (and in the logs).
func TestPublicProbesNameTheFailingDependencyWithoutItsError(t *testing.T) {
	t.Parallel()
	pg, err := devenv.StartPostgres(t.Context(), devenv.PostgresConfig{Dir: filepath.Join(t.TempDir(), "pg"), Fast: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pg.Stop() })
	base, _, admin := serve(t, server.Config{DatabaseURL: pg.URL("datajobs"), SyncMode: server.SyncOff})
	require.Eventually(t, func() bool { code, _ := readyz(t, base); return code == http.StatusOK }, 30*time.Second, 50*time.Millisecond)

	require.NoError(t, pg.Stop())
	code, public := readyz(t, base)
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "unavailable", public.Checks["database"], "named, without the error text")
	require.Equal(t, "ok", public.Checks["migrations"])
	code, private := readyz(t, admin)
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.NotEqual(t, "unavailable", private.Checks["database"], "the admin listener says why")
	require.Contains(t, private.Checks["database"], "database")
}

// Attack (issue 22, item 7): a burst of slow API requests holds every connection of the
// main pool; readiness that waited for one of them failed on every replica at once, and
// the Service dropped them all. The probe has a connection of its own.
func TestReadinessDoesNotWaitForASaturatedPool(t *testing.T) {
	t.Parallel()
	url := testenv.DatabaseURL(t)
	cfg := server.Config{DatabaseURL: url, SyncMode: server.SyncOff}
	cfg.Safety.DBMaxConns = 2
	base, _, _ := serve(t, cfg)
	require.Eventually(t, func() bool { code, _ := readyz(t, base); return code == http.StatusOK }, 30*time.Second, 50*time.Millisecond)

	// A transaction of the test holds the job table: the reads below each hold a pool
	// connection until it ends.
	holdJobTable(t, url)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for i := range 4 {
		go func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/data-jobs/for-team/team-a/jobs/waiting-job-"+strconv.Itoa(i), nil)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	// Polled on another connection: inside the lock's transaction the statistics views
	// show one snapshot.
	watch, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	defer watch.Close(context.Background())
	require.Eventually(t, func() bool {
		var waiting int
		err := watch.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`).Scan(&waiting)
		return err == nil && waiting >= 2
	}, 30*time.Second, 50*time.Millisecond, "both pool connections wait behind the lock")

	code, body := readyz(t, base)
	require.Equal(t, http.StatusOK, code, "%+v", body)
}
