package server_test

import (
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/devenv"
	"github.com/datajobs/datajobs/internal/replicaread"
	"github.com/datajobs/datajobs/internal/server"
)

// jobNames lists team-a's job names through GraphQL, VDK's jobs list.
var jobNames = "/data-jobs/for-team/team-a/jobs?" + url.Values{"query": {"{ jobs(pageNumber: 1, pageSize: 10) { content { jobName } } }"}}.Encode()

// TestListsAreServedByTheReplicaButNeverBehindTheCallersOwnWrite runs the service on a
// real streaming replica (pg_basebackup of a second PostgreSQL) whose replay is paused,
// so the replica is behind: a list read by a caller with no write of its own is served
// by the replica (the new job is not there yet, and the answer says it may lag), while
// the writer's read after its write, by the position its write's answer carried or by
// the caller this process remembers, is served by the primary and sees it.
func TestListsAreServedByTheReplicaButNeverBehindTheCallersOwnWrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	primary, err := devenv.StartPostgres(t.Context(), devenv.PostgresConfig{Dir: filepath.Join(dir, "primary"), Fast: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = primary.Stop() })
	replica, err := devenv.StartPostgres(t.Context(), devenv.PostgresConfig{Dir: filepath.Join(dir, "replica"), Fast: true, ReplicaOf: primary.Port})
	require.NoError(t, err)
	t.Cleanup(func() { _ = replica.Stop() })

	cfg := server.Config{DatabaseURL: primary.URL("datajobs"), SyncMode: server.SyncOff}
	plainBase, _, _ := serve(t, cfg) // a replica of the service without reads from the replica
	cfg.DatabaseReadURL, cfg.DatabaseReadMaxLag = replica.URL("datajobs"), time.Hour
	base, _, _ := serve(t, cfg)
	plain, c := &caller{t: t, base: plainBase}, &caller{t: t, base: base}
	require.Eventually(t, func() bool { code, _ := get(t, base+"/readyz"); return code == http.StatusOK }, 30*time.Second, 50*time.Millisecond)

	// Caught up, the replica serves and says it lags by nothing it has received.
	plain.must("", "POST", "/data-jobs/for-team/team-a/jobs", `{"job_name":"first-job","description":"d"}`, http.StatusCreated)
	require.Eventually(t, func() bool {
		return containsJob(c.do("", "GET", jobNames, ""), "first-job")
	}, 30*time.Second, 20*time.Millisecond, "the replica streams the primary's writes")

	replicaSQL(t, replica, `SELECT pg_wal_replay_pause()`)
	plain.must("", "POST", "/data-jobs/for-team/team-a/jobs", `{"job_name":"written-elsewhere","description":"d"}`, http.StatusCreated)
	stale := c.do("", "GET", jobNames, "")
	require.Equal(t, http.StatusOK, stale.status, stale.body)
	require.False(t, containsJob(stale, "written-elsewhere"), "a caller with no write of its own reads the replica, which has not replayed it: %s", stale.body)
	lag, err := strconv.Atoi(stale.header.Get(replicaread.LagHeader))
	require.NoError(t, err, "the answer states its staleness")
	require.Positive(t, lag, "the replica has received more than it replayed")

	wrote := c.do("", "POST", "/data-jobs/for-team/team-a/jobs", `{"job_name":"my-own-job","description":"d"}`, "Content-Type", "application/json")
	require.Equal(t, http.StatusCreated, wrote.status, wrote.body)
	position := wrote.header.Get(replicaread.PositionHeader)
	require.NotEmpty(t, position, "a write's answer carries the primary's position")

	// The position sent back (as another replica of the service would receive it).
	fresh := plain.do("", "GET", jobNames, "")
	require.True(t, containsJob(fresh, "my-own-job"), fresh.body)
	fresh = c.do("", "GET", jobNames, "", replicaread.MinPositionHeader, position)
	require.True(t, containsJob(fresh, "my-own-job"), "the writer never reads behind its write: %s", fresh.body)
	require.Equal(t, "0", fresh.header.Get(replicaread.LagHeader), "the primary served it")
	// Without the header: this process remembers the caller's write.
	fresh = c.do("", "GET", jobNames, "")
	require.True(t, containsJob(fresh, "my-own-job"), fresh.body)
	// A position that is no WAL position is ignored, not sent to the database.
	require.Equal(t, http.StatusOK, c.do("", "GET", jobNames, "", replicaread.MinPositionHeader, "0/0'; SELECT 1").status)
}

func containsJob(r response, name string) bool {
	return r.status == http.StatusOK && strings.Contains(r.body, `"jobName":"`+name+`"`)
}

// replicaSQL runs sql on the replica's server as its superuser.
func replicaSQL(t *testing.T, replica *devenv.Postgres, sql string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), replica.URL("postgres"))
	require.NoError(t, err)
	defer conn.Close(t.Context())
	_, err = conn.Exec(t.Context(), sql)
	require.NoError(t, err)
}
