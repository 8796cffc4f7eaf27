// Package e2e runs the built datajobs binary as separate processes, the way it is deployed.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/devenv"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.WithKubernetes()) }

// binary builds the datajobs command once per test binary.
var binary = sync.OnceValues(func() (string, error) {
	root, err := devenv.RepoRoot()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "datajobs-e2e-")
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "datajobs")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/datajobs")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w: %s", err, b)
	}
	return out, nil
})

// replica is one `datajobs serve` process.
type replica struct {
	cmd   *exec.Cmd
	base  string // the API
	admin string // /metrics and /data-jobs/debug/*
	logs  *logBuffer
}

// logBuffer is a replica's output; the test may read it while the process writes it.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func startReplica(t *testing.T, dbURL, kubeconfig, namespace string, args ...string) *replica {
	t.Helper()
	bin, err := binary()
	require.NoError(t, err)
	addr, adminAddr := freeAddr(t), freeAddr(t)
	r := &replica{base: "http://" + addr, admin: "http://" + adminAddr, logs: &logBuffer{}}
	serve := []string{
		"serve", "--listen", addr, "--admin-listen", adminAddr, "--auth-mode", "none",
		"--namespace", namespace, "--log-format", "text",
	}
	r.cmd = exec.Command(bin, append(serve, args...)...)
	r.cmd.Env = append(os.Environ(), "DATAJOBS_DATABASE_URL="+dbURL, "DATAJOBS_KUBECONFIG="+kubeconfig)
	r.cmd.Stdout, r.cmd.Stderr = r.logs, r.logs
	require.NoError(t, r.cmd.Start())
	t.Cleanup(func() {
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
		_ = r.cmd.Wait()
		if t.Failed() {
			t.Logf("replica %d logs:\n%s", r.cmd.Process.Pid, r.logs)
		}
	})
	require.Eventually(t, func() bool {
		resp, err := http.Get(r.base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, time.Minute, 100*time.Millisecond, "replica ready")
	return r
}

func (r *replica) do(t *testing.T, method, path, body string) int {
	t.Helper()
	req, err := http.NewRequest(method, r.base+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

func (r *replica) deploy(t *testing.T, name string) {
	t.Helper()
	require.Equal(t, http.StatusCreated, r.do(t, http.MethodPost, "/data-jobs/for-team/team-a/jobs",
		fmt.Sprintf(`{"job_name":%q,"team":"team-a","description":"e2e","config":{"schedule":{"schedule_cron":"0 * * * *"}}}`, name)))
	require.Equal(t, http.StatusAccepted, r.do(t, http.MethodPost, "/data-jobs/for-team/team-a/jobs/"+name+"/deployments",
		`{"job_version":"v1","enabled":true}`))
}

func TestTwoReplicasOneLeaderAndFailoverAfterSIGKILL(t *testing.T) {
	t.Parallel()
	dbURL, kubeconfig, ns := testenv.DatabaseURL(t), testenv.Kubeconfig(t), testenv.Namespace(t)
	client := testenv.Clientset(t)
	a := startReplica(t, dbURL, kubeconfig, ns)
	b := startReplica(t, dbURL, kubeconfig, ns)
	db, err := store.Open(t.Context(), store.Config{URL: dbURL})
	require.NoError(t, err)
	defer db.Close()

	var holder string
	var epoch int64
	require.Eventually(t, func() bool {
		h, e, expires, err := db.LeaseHolder(t.Context(), store.SyncLeaseName)
		holder, epoch = h, e
		return err == nil && h != "" && expires.After(time.Now())
	}, time.Minute, 100*time.Millisecond)
	leader, follower := a, b
	if !strings.Contains(holder, fmt.Sprintf("-%d-", b.cmd.Process.Pid)) {
		require.Contains(t, holder, fmt.Sprintf("-%d-", a.cmd.Process.Pid), "the lease names one of the two replicas")
	} else {
		leader, follower = b, a
	}

	// Both replicas serve the API; only the leader synchronizes.
	follower.deploy(t, "before-failover")
	cronJobExists := func(name string) bool {
		_, err := client.BatchV1().CronJobs(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Logf("get cronjob %s: %v", name, err)
		}
		return err == nil
	}
	require.Eventually(t, func() bool { return cronJobExists("before-failover") }, time.Minute, 50*time.Millisecond)

	require.NoError(t, leader.cmd.Process.Signal(syscall.SIGKILL))
	names := make([]string, 10)
	for i := range names {
		names[i] = fmt.Sprintf("after-failover-%d", i)
		follower.deploy(t, names[i])
	}
	// The default lease (10 s) expires and the follower takes over and finishes the work.
	require.Eventually(t, func() bool {
		for _, n := range names {
			if !cronJobExists(n) {
				return false
			}
		}
		return true
	}, 2*time.Minute, 100*time.Millisecond, "the new leader applies every change")
	h, e, _, err := db.LeaseHolder(t.Context(), store.SyncLeaseName)
	require.NoError(t, err)
	require.NotEqual(t, holder, h)
	require.Contains(t, h, fmt.Sprintf("-%d-", follower.cmd.Process.Pid))
	require.Greater(t, e, epoch)
}

// freeAddr is a loopback address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}
