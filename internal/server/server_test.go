package server_test

import (
	"cmp"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/devenv"
	"github.com/datajobs/datajobs/internal/server"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.WithKubernetes(), testenv.WithOIDC()) }

// serve runs the server until the test ends and returns its base URL and that of its
// admin listener. It serves in auth mode none unless cfg says otherwise.
func serve(t *testing.T, cfg server.Config) (string, func(), string) {
	t.Helper()
	cfg.Listen, cfg.AdminListen = cmp.Or(cfg.Listen, "127.0.0.1:0"), "127.0.0.1:0"
	if cfg.Auth.Mode == "" {
		cfg.Auth.Mode = server.AuthNone
	}
	adminReady := make(chan net.Addr, 1)
	cfg.AdminReady = adminReady
	cfg.Kubeconfig = testenv.Kubeconfig(t)
	if cfg.Namespace == "" {
		cfg.Namespace = testenv.Namespace(t)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- server.Run(ctx, cfg, ready) }()
	var addr net.Addr
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("server did not start: %v", err)
	}
	stop := func() {
		cancel()
		require.NoError(t, <-done)
	}
	t.Cleanup(func() {
		if ctx.Err() == nil {
			stop()
		}
	})
	return "http://" + addr.String(), stop, "http://" + (<-adminReady).String()
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

func TestReadyzFollowsPostgreSQL(t *testing.T) {
	t.Parallel()
	pg, err := devenv.StartPostgres(t.Context(), devenv.PostgresConfig{Dir: filepath.Join(t.TempDir(), "pg"), Fast: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pg.Stop() })
	base, _, _ := serve(t, server.Config{DatabaseURL: pg.URL("datajobs"), SyncMode: server.SyncOff})

	require.Eventually(t, func() bool { code, _ := get(t, base+"/readyz"); return code == http.StatusOK }, 30*time.Second, 50*time.Millisecond)

	require.NoError(t, pg.Stop())
	code, body := get(t, base+"/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	var ready struct {
		Status string            `json:"status"`
		Checks map[string]string `json:"checks"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &ready))
	require.Equal(t, "unavailable", ready.Status)
	require.NotEqual(t, "ok", ready.Checks["database"], "the failing dependency is named")
	require.NotContains(t, ready.Checks, "kubernetes", "the API never needs Kubernetes")

	// The API answers 503 with a VDK error body, not a 500.
	code, body = get(t, base+"/data-jobs/for-team/team-a/jobs/some-job")
	require.Equal(t, http.StatusServiceUnavailable, code, body)
	require.Contains(t, body, `"what"`)
	require.Contains(t, body, "database")

	// Liveness does not depend on the database: restarting would not help.
	code, _ = get(t, base+"/healthz")
	require.Equal(t, http.StatusOK, code)

	require.NoError(t, pg.Start(t.Context()))
	require.Eventually(t, func() bool { code, _ := get(t, base+"/readyz"); return code == http.StatusOK }, 30*time.Second, 50*time.Millisecond)
}

func TestMetricsAndGracefulShutdownReleasesTheLease(t *testing.T) {
	t.Parallel()
	url := testenv.DatabaseURL(t)
	_, stop, admin := serve(t, server.Config{DatabaseURL: url, SyncMode: server.SyncOn})
	db, err := store.Open(t.Context(), store.Config{URL: url})
	require.NoError(t, err)
	defer db.Close()

	var holder string
	require.Eventually(t, func() bool {
		h, _, expires, err := db.LeaseHolder(t.Context(), store.SyncLeaseName)
		holder = h
		return err == nil && h != "" && expires.After(time.Now())
	}, 30*time.Second, 50*time.Millisecond, "the only replica leads")

	code, body := get(t, admin+"/metrics")
	require.Equal(t, http.StatusOK, code)
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes", "datajobs_leader_is_leader", "datajobs_sync_queue_depth", "datajobs_sync_pass_duration_seconds", "datajobs_sync_drift_repairs_total", "datajobs_sync_lag_seconds"} {
		require.Contains(t, body, name, "metric exported")
	}

	stop()
	h, _, expires, err := db.LeaseHolder(t.Context(), store.SyncLeaseName)
	require.NoError(t, err)
	require.Equal(t, holder, h)
	require.False(t, expires.After(time.Now()), "a graceful shutdown releases the lease at once")
}

func TestSynchronizerResumesByItselfAfterADatabaseOutage(t *testing.T) {
	t.Parallel()
	pg, err := devenv.StartPostgres(t.Context(), devenv.PostgresConfig{Dir: filepath.Join(t.TempDir(), "pg"), Fast: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pg.Stop() })
	cfg := server.Config{DatabaseURL: pg.URL("datajobs"), SyncMode: server.SyncOn, LeaseDuration: 3 * time.Second}
	client := testenv.Clientset(t)
	ns := testenv.Namespace(t)
	cfg.Namespace = ns
	base, _, _ := serve(t, cfg)
	require.Eventually(t, func() bool { code, _ := get(t, base+"/readyz"); return code == http.StatusOK }, 30*time.Second, 50*time.Millisecond)

	deploy := func(name string) {
		t.Helper()
		require.Equal(t, http.StatusCreated, post(t, base+"/data-jobs/for-team/team-a/jobs",
			`{"job_name":"`+name+`","team":"team-a","description":"d","config":{"schedule":{"schedule_cron":"0 * * * *"}}}`))
		require.Equal(t, http.StatusAccepted, post(t, base+"/data-jobs/for-team/team-a/jobs/"+name+"/deployments", `{"job_version":"v1"}`))
	}
	exists := func(name string) bool {
		_, err := client.BatchV1().CronJobs(ns).Get(context.Background(), name, metav1.GetOptions{})
		return err == nil
	}
	deploy("before-outage")
	require.Eventually(t, func() bool { return exists("before-outage") }, 30*time.Second, 50*time.Millisecond)

	require.NoError(t, pg.Stop())
	require.Eventually(t, func() bool { code, _ := get(t, base+"/readyz"); return code == http.StatusServiceUnavailable }, 30*time.Second, 50*time.Millisecond)
	require.NoError(t, pg.Start(t.Context()))

	require.Eventually(t, func() bool { code, _ := get(t, base+"/readyz"); return code == http.StatusOK }, 30*time.Second, 50*time.Millisecond)
	deploy("after-outage")
	require.Eventually(t, func() bool { return exists("after-outage") }, time.Minute, 50*time.Millisecond, "the synchronizer resumed")
}

func post(t *testing.T, url, body string) int {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

func TestDryRunServesThePlanAndWritesNothing(t *testing.T) {
	t.Parallel()
	ns := testenv.Namespace(t)
	// Frequent full passes: the planned-jobs gauge is the last full pass's, and the first
	// pass may run before the deployment below exists.
	base, _, admin := serve(t, server.Config{DatabaseURL: testenv.DatabaseURL(t), SyncMode: server.SyncDryRun, Namespace: ns, ResyncInterval: 200 * time.Millisecond})
	require.Eventually(t, func() bool { code, _ := get(t, base+"/readyz"); return code == http.StatusOK }, 30*time.Second, 50*time.Millisecond)
	require.Equal(t, http.StatusCreated, post(t, base+"/data-jobs/for-team/team-a/jobs",
		`{"job_name":"planned-job","team":"team-a","description":"d","config":{"schedule":{"schedule_cron":"0 * * * *"}}}`))
	require.Equal(t, http.StatusAccepted, post(t, base+"/data-jobs/for-team/team-a/jobs/planned-job/deployments", `{"job_version":"v1"}`))

	var plan struct {
		Mode    string         `json:"mode"`
		Changes int            `json:"changes"`
		Summary map[string]int `json:"summary"`
		Jobs    []struct {
			Job    string `json:"job"`
			Action string `json:"action"`
		} `json:"jobs"`
	}
	require.Eventually(t, func() bool {
		_, body := get(t, admin+"/data-jobs/debug/sync-plan")
		plan.Summary = nil // Unmarshal would add to the map of an earlier answer
		require.NoError(t, json.Unmarshal([]byte(body), &plan))
		return plan.Changes == 1
	}, 30*time.Second, 50*time.Millisecond)
	require.Equal(t, "dry-run", plan.Mode)
	require.Equal(t, map[string]int{"create": 1}, plan.Summary)
	require.Equal(t, "planned-job", plan.Jobs[0].Job)
	require.Eventually(t, func() bool {
		_, body := get(t, admin+"/metrics")
		return strings.Contains(body, `datajobs_sync_planned_jobs{action="create",target="default"} 1`)
	}, 30*time.Second, 50*time.Millisecond, "a full pass counts the planned create")

	list, err := testenv.Clientset(t).BatchV1().CronJobs(ns).List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, list.Items, "a dry run creates nothing")
	_, body := get(t, base+"/data-jobs/for-team/team-a/jobs/planned-job/deployments/release")
	require.Contains(t, body, `"status":"pending"`, "nor records anything")
}

func TestMetricsAndDebugAreOnlyOnTheAdminListener(t *testing.T) {
	t.Parallel()
	base, _, admin := serve(t, server.Config{DatabaseURL: testenv.DatabaseURL(t), SyncMode: server.SyncOff})
	require.Eventually(t, func() bool { code, _ := get(t, base+"/readyz"); return code == http.StatusOK }, 30*time.Second, 50*time.Millisecond)
	for _, path := range []string{"/metrics", "/data-jobs/debug/sync-plan"} {
		code, _ := get(t, base+path)
		require.Equal(t, http.StatusNotFound, code, "%s is not on the public port", path)
		code, _ = get(t, admin+path)
		require.Equal(t, http.StatusOK, code, "%s is on the admin port", path)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		code, _ := get(t, admin+path)
		require.Equal(t, http.StatusOK, code, "%s is on both", path)
	}
	// Auth mode none (datajobs dev) needs no login.
	code, body := get(t, base+"/data-jobs/for-team/team-a/info")
	require.Equal(t, http.StatusOK, code, body)
}

// Go's profiles are served on the admin listener only when asked for (--admin-profiling):
// a CPU profile costs the process while it runs, so they are off by default.
func TestProfilesAreOnTheAdminListenerOnlyWhenAskedFor(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{false, true} {
		base, _, admin := serve(t, server.Config{DatabaseURL: testenv.DatabaseURL(t), SyncMode: server.SyncOff, AdminProfiling: on})
		require.Eventually(t, func() bool { code, _ := get(t, base+"/readyz"); return code == http.StatusOK }, 30*time.Second, 50*time.Millisecond)
		code, body := get(t, admin+"/debug/pprof/heap?debug=1")
		if !on {
			require.Equal(t, http.StatusNotFound, code, "profiling off")
			continue
		}
		require.Equal(t, http.StatusOK, code, body)
		require.Contains(t, body, "heap profile:")
		code, _ = get(t, base+"/debug/pprof/heap?debug=1")
		require.Equal(t, http.StatusNotFound, code, "never on the public port")
	}
}

func TestOIDCWithoutIssuerRefusesToStart(t *testing.T) {
	t.Parallel()
	err := server.Run(t.Context(), server.Config{DatabaseURL: "postgres://127.0.0.1:1/none", Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0"}, nil)
	require.ErrorContains(t, err, "--oidc-issuer-url", "oidc is the default mode and needs an issuer")
}

// serveWith runs server.Run with cfg as it is but for the listeners and auth mode none,
// and returns the base URLs of the API and the admin listener and the channel of Run's
// result; the test cancels ctx to stop it.
func serveWith(t *testing.T, ctx context.Context, cfg server.Config) (string, string, <-chan error) {
	t.Helper()
	cfg.Listen, cfg.AdminListen, cfg.Auth.Mode = "127.0.0.1:0", "127.0.0.1:0", server.AuthNone
	adminReady := make(chan net.Addr, 1)
	cfg.AdminReady = adminReady
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- server.Run(ctx, cfg, ready) }()
	select {
	case addr := <-ready:
		return "http://" + addr.String(), "http://" + (<-adminReady).String(), done
	case err := <-done:
		t.Fatalf("server did not start: %v", err)
		return "", "", nil
	}
}

// unreachableKubeconfig is a kubeconfig naming an apiserver on a port nothing listens on.
func unreachableKubeconfig(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := `apiVersion: v1
kind: Config
clusters: [{name: down, cluster: {server: "https://` + addr + `", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: down, context: {cluster: down, user: u}}]
current-context: down
`
	require.NoError(t, os.WriteFile(path, []byte(cfg), 0o600))
	return path
}

func TestReadinessStaysUpWhileTheAPIServerIsDown(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	base, admin, done := serveWith(t, ctx, server.Config{
		DatabaseURL: testenv.DatabaseURL(t), Kubeconfig: unreachableKubeconfig(t),
		Namespace: "unreachable", SyncMode: server.SyncOn,
	})
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	require.Eventually(t, func() bool { code, _ := get(t, base+"/readyz"); return code == http.StatusOK }, 30*time.Second, 50*time.Millisecond,
		"the API serves although the apiserver is down: it never calls it")
	code, body := get(t, base+"/data-jobs/for-team/team-a/jobs/some-job")
	require.Equal(t, http.StatusNotFound, code, body)

	var live struct {
		Status string `json:"status"`
		Detail struct {
			Kubernetes string `json:"kubernetes"`
			Sync       struct {
				Mode   string `json:"mode"`
				Leader bool   `json:"leader"`
			} `json:"sync"`
		} `json:"detail"`
	}
	require.Eventually(t, func() bool {
		code, body := get(t, base+"/healthz")
		require.Equal(t, http.StatusOK, code, "liveness: restarting would not bring the apiserver back")
		require.NoError(t, json.Unmarshal([]byte(body), &live))
		return live.Detail.Kubernetes != "not checked yet"
	}, 30*time.Second, 50*time.Millisecond)
	require.Equal(t, "ok", live.Status)
	require.Equal(t, "unavailable", live.Detail.Kubernetes, "the public detail names Kubernetes, not its error")
	require.Equal(t, "on", live.Detail.Sync.Mode)
	_, body = get(t, admin+"/healthz")
	require.NoError(t, json.Unmarshal([]byte(body), &live))
	require.Contains(t, live.Detail.Kubernetes, "kubernetes api server readyz", "the admin listener's detail has the error")

	_, metrics := get(t, admin+"/metrics")
	require.Contains(t, metrics, "datajobs_kubernetes_reachable 0")
}

func TestHealthzDetailReportsAReachableAPIServer(t *testing.T) {
	t.Parallel()
	base, _, admin := serve(t, server.Config{DatabaseURL: testenv.DatabaseURL(t), SyncMode: server.SyncOn})
	var live struct {
		Detail struct {
			Kubernetes string `json:"kubernetes"`
			Sync       struct {
				Leader bool `json:"leader"`
			} `json:"sync"`
		} `json:"detail"`
	}
	require.Eventually(t, func() bool {
		_, body := get(t, base+"/healthz")
		require.NoError(t, json.Unmarshal([]byte(body), &live))
		return live.Detail.Kubernetes == "ok" && live.Detail.Sync.Leader
	}, 30*time.Second, 50*time.Millisecond, "the only replica leads and reaches the apiserver")
	_, metrics := get(t, admin+"/metrics")
	require.Contains(t, metrics, "datajobs_kubernetes_reachable 1")
	require.Contains(t, metrics, "datajobs_http_requests_in_flight")
}

func TestShutdownCancelsRequestsThatOutliveTheGracePeriod(t *testing.T) {
	t.Parallel()
	url := testenv.DatabaseURL(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base, _, done := serveWith(t, ctx, server.Config{
		DatabaseURL: url, Kubeconfig: testenv.Kubeconfig(t), Namespace: testenv.Namespace(t),
		SyncMode: server.SyncOff, ShutdownTimeout: 200 * time.Millisecond,
	})
	require.Eventually(t, func() bool { code, _ := get(t, base+"/readyz"); return code == http.StatusOK }, 30*time.Second, 50*time.Millisecond)

	// A transaction of the test holds the job table, so a request that reads a job waits.
	tx := holdJobTable(t, url)

	answered := make(chan int, 1)
	go func() {
		resp, err := http.Get(base + "/data-jobs/for-team/team-a/jobs/some-job")
		if err != nil {
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	require.Eventually(t, func() bool {
		var waiting int
		err := tx.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
		require.NoError(t, err)
		return waiting > 0
	}, 30*time.Second, 20*time.Millisecond, "the request waits on the lock")

	cancel()
	// Run returns while the lock is still held: the stuck request was cancelled after the
	// grace period instead of holding the process (and its database pool) forever.
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(time.Minute):
		t.Fatal("Run did not return while a request was stuck")
	}
	code := <-answered
	require.NotEqual(t, http.StatusOK, code, "the stuck request did not complete")
}

// holdJobTable locks the data_job table in a transaction of the test until it ends: every
// request that reads a job waits meanwhile, holding a connection of the service's pool.
// The transaction is returned for the test's own reads while it holds the lock.
func holdJobTable(t *testing.T, url string) pgx.Tx {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	tx, err := conn.Begin(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	_, err = tx.Exec(t.Context(), `LOCK TABLE data_job IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)
	return tx
}
