// Package e2e runs the built datajobs binary as separate processes, the way it is deployed.
package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.WithKubernetes()) }

// replica is one `datajobs serve` process.
type replica struct {
	*testenv.Process
	base  string // the API
	admin string // /metrics and /data-jobs/debug/*
}

func startReplica(t *testing.T, dbURL, kubeconfig, namespace string, args ...string) *replica {
	t.Helper()
	bin, err := testenv.Binary()
	require.NoError(t, err)
	addr, adminAddr := testenv.FreeAddr(t), testenv.FreeAddr(t)
	serve := []string{
		"serve", "--listen", addr, "--admin-listen", adminAddr, "--auth-mode", "none",
		"--namespace", namespace, "--log-format", "text",
		// The tests deploy tags nobody pushed (registry.local): the unchecked images of before issue 21.
		"--verify-prebuilt-images=false",
	}
	env := append(os.Environ(), "DATAJOBS_DATABASE_URL="+dbURL, "DATAJOBS_KUBECONFIG="+kubeconfig)
	p := testenv.Start(t, bin, append(serve, args...), env, "http://"+addr+"/readyz")
	return &replica{Process: p, base: "http://" + addr, admin: "http://" + adminAddr}
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
	if !strings.Contains(holder, fmt.Sprintf("-%d-", b.Cmd.Process.Pid)) {
		require.Contains(t, holder, fmt.Sprintf("-%d-", a.Cmd.Process.Pid), "the lease names one of the two replicas")
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

	require.NoError(t, leader.Cmd.Process.Signal(syscall.SIGKILL))
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
	require.Contains(t, h, fmt.Sprintf("-%d-", follower.Cmd.Process.Pid))
	require.Greater(t, e, epoch)
}
