package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/datajobs/datajobs/internal/devenv"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testenv"
)

// outcome is what happens to one execution's pods while no replica leads, and what the
// API must then say about it.
type outcome struct {
	kind    string
	status  string
	message string
	// state is the main container's final state the kubelet writes (nil: the Job is
	// deleted by hand instead).
	state func() corev1.ContainerState
	phase corev1.PodPhase
}

var outcomes = []outcome{
	{"success", "succeeded", "", func() corev1.ContainerState { return terminated(0, "Completed", "") }, corev1.PodSucceeded},
	{
		"msg-user-error", "user_error", "User error (vdk 0.3.1)",
		func() corev1.ContainerState {
			return terminated(1, "Error", `{"status": "User error", "vdk_version": "0.3.1"}`)
		}, corev1.PodFailed,
	},
	{"oom-killed", "user_error", "out of memory", func() corev1.ContainerState { return terminated(137, "OOMKilled", "") }, corev1.PodFailed},
	{"exit-3", "user_error", "exited with code 3", func() corev1.ContainerState { return terminated(3, "Error", "") }, corev1.PodFailed},
	{"deleted", "platform_error", "execution record lost: ", nil, ""},
}

// TestEveryExecutionEndsWithItsTrueStatusAfterTheLeaderIsKilled runs 50 executions to
// running, SIGKILLs the leading replica, freezes the other one (SIGSTOP) so that nobody
// leads while every pod reaches its outcome (the test plays the kubelet: the deployments
// request more CPU than the kwok node has, so their pods are never scheduled and kwok
// leaves them alone), then lets the survivor take over: it must reconcile every
// execution against Jobs it never saw change, and record each one's true status.
func TestEveryExecutionEndsWithItsTrueStatusAfterTheLeaderIsKilled(t *testing.T) {
	t.Parallel()
	const n = 50
	dbURL, kubeconfig, ns := testenv.DatabaseURL(t), testenv.Kubeconfig(t), testenv.Namespace(t)
	client := testenv.Clientset(t)
	args := []string{"--lease-duration", "3s", "--max-cpu", "200"}
	a := startReplica(t, dbURL, kubeconfig, ns, args...)
	b := startReplica(t, dbURL, kubeconfig, ns, args...)
	db, err := store.Open(t.Context(), store.Config{URL: dbURL})
	require.NoError(t, err)
	defer db.Close()

	holder, epoch := leaseHolder(t, db)
	leader, follower := a, b
	if strings.Contains(holder, fmt.Sprintf("-%d-", b.Cmd.Process.Pid)) {
		leader, follower = b, a
	}
	require.Contains(t, holder, fmt.Sprintf("-%d-", leader.Cmd.Process.Pid), "the lease names one of the two replicas")

	// 50 jobs, each deployed (through either replica) and started once.
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("run-%02d-%s", i, outcomes[i%len(outcomes)].kind)
		r := []*replica{a, b}[i%2]
		require.Equal(t, http.StatusCreated, r.do(t, http.MethodPost, "/data-jobs/for-team/team-a/jobs",
			fmt.Sprintf(`{"job_name":%q,"team":"team-a","description":"e2e","config":{"schedule":{"schedule_cron":"0 0 1 1 *"}}}`, names[i])))
		require.Equal(t, http.StatusAccepted, r.do(t, http.MethodPost, "/data-jobs/for-team/team-a/jobs/"+names[i]+"/deployments",
			`{"job_version":"v1","enabled":true,"resources":{"cpu_request":100,"cpu_limit":100}}`))
	}
	ids := make([]string, n)
	for i, name := range names {
		ids[i] = []*replica{a, b}[i%2].startExecution(t, name)
	}

	// Every first pod starts running; the leader records all 50 as running.
	pods := map[string]bool{} // pods the kubelet has already moved
	require.Eventually(t, func() bool {
		for _, id := range ids {
			for _, p := range jobPods(t, client, ns, id) {
				if !pods[p.Name] && devenv.SetPodStatus(t.Context(), client, &p, corev1.PodRunning, "", running()) == nil {
					pods[p.Name] = true
				}
			}
		}
		return len(pods) == n
	}, 5*time.Minute, 200*time.Millisecond, "a running pod for every execution")
	require.Eventually(t, func() bool {
		for i, id := range ids {
			if e := leader.execution(t, names[i], id); e.Status != "running" {
				return false
			}
		}
		return true
	}, 5*time.Minute, 200*time.Millisecond, "every execution recorded as running")

	// Nobody leads from here on: the leader is dead and the follower frozen.
	require.NoError(t, leader.Cmd.Process.Signal(syscall.SIGKILL))
	require.NoError(t, follower.Cmd.Process.Signal(syscall.SIGSTOP))
	t.Cleanup(func() { _ = follower.Cmd.Process.Signal(syscall.SIGCONT) }) // before its SIGTERM

	// The kubelet moves every pod to its outcome; a failed pod is retried by the Job
	// controller (backoffLimit 3), and every retry fails the same way, until Kubernetes
	// fails the Job. The "deleted" Jobs are deleted by hand.
	for i, id := range ids {
		if outcomes[i%len(outcomes)].state == nil {
			require.NoError(t, client.BatchV1().Jobs(ns).Delete(t.Context(), id, metav1.DeleteOptions{PropagationPolicy: new(metav1.DeletePropagationBackground)}))
		}
	}
	finished := map[string]bool{}
	require.Eventually(t, func() bool {
		for i, id := range ids {
			if finished[id] {
				continue
			}
			o := outcomes[i%len(outcomes)]
			j, err := client.BatchV1().Jobs(ns).Get(t.Context(), id, metav1.GetOptions{})
			switch {
			case o.state == nil:
				finished[id] = apierrors.IsNotFound(err)
				continue
			case err != nil:
				t.Logf("get job %s: %v", id, err)
				continue
			case jobFinished(j):
				finished[id] = true
				continue
			}
			for _, p := range jobPods(t, client, ns, id) {
				if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && p.DeletionTimestamp == nil {
					if err := devenv.SetPodStatus(t.Context(), client, &p, o.phase, "", o.state()); err != nil {
						t.Logf("pod %s: %v", p.Name, err)
					}
				}
			}
		}
		return len(finished) == n
	}, 10*time.Minute, 500*time.Millisecond, "every Job finished or gone")

	// The survivor wakes up, takes the lease and reconciles.
	require.NoError(t, follower.Cmd.Process.Signal(syscall.SIGCONT))
	require.Eventually(t, func() bool {
		h, e, expires, err := db.LeaseHolder(t.Context(), store.SyncLeaseName)
		return err == nil && strings.Contains(h, fmt.Sprintf("-%d-", follower.Cmd.Process.Pid)) && e > epoch && expires.After(time.Now())
	}, 2*time.Minute, 100*time.Millisecond, "the follower leads")

	final := func(s string) bool { return s != "submitted" && s != "running" }
	got := make([]executionBody, n)
	require.Eventually(t, func() bool {
		for i, id := range ids {
			got[i] = follower.execution(t, names[i], id)
			if !final(got[i].Status) {
				return false
			}
		}
		return true
	}, 5*time.Minute, 200*time.Millisecond, "every execution ends")
	conn, err := pgx.Connect(t.Context(), dbURL)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(t.Context()))
	for i, e := range got {
		o := outcomes[i%len(outcomes)]
		assert.Equal(t, o.status, e.Status, "%s: %s", e.ID, e.Message)
		assert.Contains(t, e.Message, o.message, e.ID)
		assert.NotNil(t, e.EndTime, e.ID)
		var status, last string
		require.NoError(t, conn.QueryRow(t.Context(), `SELECT last_execution_status, last_execution_id FROM data_job WHERE name = $1`, names[i]).Scan(&status, &last))
		assert.Equal(t, o.status, status, "job row of %s", names[i])
		assert.Equal(t, ids[i], last, "job row of %s", names[i])
	}
}

// executionBody is the part of VDK's DataJobExecution the test reads.
type executionBody struct {
	ID      string     `json:"id"`
	Status  string     `json:"status"`
	Message string     `json:"message"`
	EndTime *time.Time `json:"end_time"`
}

func (r *replica) startExecution(t *testing.T, name string) string {
	t.Helper()
	return r.startExecutionFor(t, "team-a", name)
}

// startExecutionFor starts a manual execution of the job name of team and returns its id.
func (r *replica) startExecutionFor(t *testing.T, team, name string) string {
	t.Helper()
	jobPath := "/data-jobs/for-team/" + team + "/jobs/" + name
	resp, err := http.Post(r.base+jobPath+"/deployments/production/executions", "application/json", strings.NewReader(`{"started_by":"e2e"}`))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	var e executionBody
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
	require.NotEmpty(t, e.ID)
	require.Equal(t, jobPath+"/executions/"+e.ID, resp.Header.Get("Location"))
	return e.ID
}

func (r *replica) execution(t *testing.T, name, id string) executionBody {
	t.Helper()
	resp, err := http.Get(r.base + "/data-jobs/for-team/team-a/jobs/" + name + "/executions/" + id)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var e executionBody
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
	return e
}

// leaseHolder waits for a live synchronizer lease and returns its holder and epoch.
func leaseHolder(t *testing.T, db *store.Store) (string, int64) {
	t.Helper()
	var holder string
	var epoch int64
	require.Eventually(t, func() bool {
		h, e, expires, err := db.LeaseHolder(t.Context(), store.SyncLeaseName)
		holder, epoch = h, e
		return err == nil && h != "" && expires.After(time.Now())
	}, time.Minute, 100*time.Millisecond)
	return holder, epoch
}

// jobPods lists the pods the Job controller made for the Job.
func jobPods(t *testing.T, client kubernetes.Interface, ns, jobName string) []corev1.Pod {
	t.Helper()
	pods, err := client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + jobName})
	require.NoError(t, err)
	return pods.Items
}

func running() corev1.ContainerState {
	return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}
}

func terminated(code int32, reason, msg string) corev1.ContainerState {
	now := metav1.Now()
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, Message: msg, StartedAt: now, FinishedAt: now}}
}

// jobFinished reports whether Kubernetes has decided the Job's outcome.
func jobFinished(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) {
			return true
		}
	}
	return false
}
