package tracker_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/tracker"
)

// jobCreated waits until the leader recorded that it created the Job of execution id.
func (f *execFixture) jobCreated(id string) {
	f.t.Helper()
	require.Eventually(f.t, func() bool {
		var created bool
		err := f.conn().QueryRow(f.t.Context(), `SELECT job_created_at IS NOT NULL FROM data_job_execution WHERE id = $1`, id).Scan(&created)
		require.NoError(f.t, err)
		return created
	}, 30*time.Second, 10*time.Millisecond, "the Job's creation of %s is recorded", id)
}

// conn is a connection of the test's own, closed at its end.
func (f *execFixture) conn() *pgx.Conn {
	f.t.Helper()
	conn, err := pgx.Connect(f.t.Context(), f.dbURL)
	require.NoError(f.t, err)
	f.t.Cleanup(func() { conn.Close(context.WithoutCancel(f.t.Context())) })
	return conn
}

// holdWorker makes the tracker's only worker wait, as a leader far behind under load
// does: it locks the row of execution id, then plays the kubelet on its pod, whose
// status write then waits for the lock. It returns once the write waits; release lets
// it go on.
func (f *execFixture) holdWorker(id string, pod *corev1.Pod) (release func()) {
	f.t.Helper()
	conn := f.conn()
	tx, err := conn.Begin(f.t.Context())
	require.NoError(f.t, err)
	_, err = tx.Exec(f.t.Context(), `SELECT FROM data_job_execution WHERE id = $1 FOR UPDATE`, id)
	require.NoError(f.t, err)
	f.kubelet(pod, corev1.PodRunning, running(), "")
	probe := f.conn()
	require.Eventually(f.t, func() bool {
		var n int
		require.NoError(f.t, probe.QueryRow(f.t.Context(), `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n))
		return n > 0
	}, 30*time.Second, 10*time.Millisecond, "the tracker's write of %s waits for the lock", id)
	return func() { require.NoError(f.t, tx.Rollback(f.t.Context())) }
}

// deleteJobAndPod deletes execution id's Job with propagation and its pod at once, as a
// person or a script does, and waits until the apiserver has neither.
func (f *execFixture) deleteJobAndPod(id string, pod *corev1.Pod, propagation metav1.DeletionPropagation) {
	f.t.Helper()
	require.NoError(f.t, f.client.BatchV1().Jobs(f.ns).Delete(f.t.Context(), id, metav1.DeleteOptions{PropagationPolicy: &propagation}))
	if err := f.client.CoreV1().Pods(f.ns).Delete(f.t.Context(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); !apierrors.IsNotFound(err) {
		require.NoError(f.t, err) // (the garbage collector may have been first)
	}
	require.Eventually(f.t, func() bool {
		_, err := f.client.CoreV1().Pods(f.ns).Get(f.t.Context(), pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err) && f.jobGone(id)
	}, 60*time.Second, 20*time.Millisecond, "the Job and pod of %s are gone", id)
}

// gauge reads the value of the gauge or counter name with label kind from reg (kind "":
// the one without labels; 0: none).
func gauge(t *testing.T, reg *prometheus.Registry, name, kind string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			got := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" {
					got = l.GetValue()
				}
			}
			if got == kind {
				return m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// On main a run whose Job and pod were deleted after the pod ended but before the leader
// looked (a person cleaning up, a script, a .ci/run of e2e's log test under load) was
// recorded lost, platform_error "execution record lost", even when it had succeeded: the
// tracker kept the deleted Job's last state, in which the Job controller had not counted
// the pod yet, but not the deleted pod's, which had the outcome. The user saw a platform
// error for a run that did its work (and a failed run's exit code and message were lost).
func TestARunWhoseJobAndPodAreDeletedBeforeTheLeaderSawItEndIsRecordedWithItsTrueOutcome(t *testing.T) {
	f := newExecFixture(t)
	for _, name := range []string{"busy-job", "ended-ok", "ended-fg", "ended-failed"} {
		f.heldJob(name)
	}
	reg := prometheus.NewRegistry()
	f.startExecutionsWith(tracker.Config{Settings: controller.Settings{Workers: 1}, Metrics: tracker.NewMetrics(reg)})
	runs := map[string]string{}
	pods := map[string]*corev1.Pod{}
	for _, name := range []string{"busy-job", "ended-ok", "ended-fg", "ended-failed"} {
		runs[name] = f.run(name, "")
		pods[name] = f.pod(runs[name])
		f.jobCreated(runs[name])
	}
	for _, name := range []string{"ended-ok", "ended-fg", "ended-failed"} {
		f.kubelet(pods[name], corev1.PodRunning, running(), "")
		f.status(name, runs[name], job.ExecRunning)
	}

	release := f.holdWorker(runs["busy-job"], pods["busy-job"])
	f.kubelet(pods["ended-ok"], corev1.PodSucceeded, exited(0, "Completed", ""), "")
	f.kubelet(pods["ended-fg"], corev1.PodSucceeded, exited(0, "Completed", ""), "")
	f.kubelet(pods["ended-failed"], corev1.PodFailed, exited(3, "Error", ""), "")
	f.deleteJobAndPod(runs["ended-ok"], pods["ended-ok"], metav1.DeletePropagationBackground)
	f.deleteJobAndPod(runs["ended-fg"], pods["ended-fg"], metav1.DeletePropagationForeground)
	f.deleteJobAndPod(runs["ended-failed"], pods["ended-failed"], metav1.DeletePropagationBackground)
	require.Eventually(t, func() bool {
		return gauge(t, reg, "datajobs_executions_kept", "deleted_pod") == 3
	}, 30*time.Second, 10*time.Millisecond, "the tracker has the deleted pods' last states before it looks")
	require.Equal(t, string(job.ExecRunning), f.execution("ended-ok", runs["ended-ok"]).Status, "the leader has not looked yet")
	release()

	for _, name := range []string{"ended-ok", "ended-fg"} {
		e := f.status(name, runs[name], job.ExecSucceeded)
		require.Empty(t, e.Message, name)
		require.NotNil(t, e.EndTime, name)
	}
	e := f.status("ended-failed", runs["ended-failed"], job.ExecUserError)
	require.Contains(t, e.Message, "exited with code 3")
	require.NotNil(t, e.ExitCode)
	require.Equal(t, int32(3), *e.ExitCode)
	require.Eventually(t, func() bool {
		return gauge(t, reg, "datajobs_executions_kept", "deleted_pod") == 0 &&
			gauge(t, reg, "datajobs_executions_kept", "deleted_job") == 0
	}, 30*time.Second, 10*time.Millisecond, "nothing is kept once the runs are recorded")
}

// logBuffer is a log destination the tracker writes to while the test reads it.
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

// The tracker's keeps are bounded (issue 28: a bounded number of objects in flight). Here
// the bound is 1 and two runs end and go, Job and pod, while the leader is behind: the
// older run's last states are dropped, and that is said (a warning naming it, a metric),
// not silent; it is recorded from what is left, lost, and the newer one truly. On main
// the keep of deleted Jobs had no bound, and a mass delete while the leader was behind
// kept every Job in memory.
func TestPastItsBoundTheTrackerDropsTheOldestDeletedStatesAndSaysSo(t *testing.T) {
	f := newExecFixture(t)
	for _, name := range []string{"busy-job", "older-run", "newer-run"} {
		f.heldJob(name)
	}
	reg, logs := prometheus.NewRegistry(), &logBuffer{}
	f.startExecutionsWith(tracker.Config{
		Settings: controller.Settings{Workers: 1, Logger: slog.New(slog.NewJSONHandler(logs, nil))}, MaxKept: 1, Metrics: tracker.NewMetrics(reg),
	})
	runs, pods := map[string]string{}, map[string]*corev1.Pod{}
	for _, name := range []string{"busy-job", "older-run", "newer-run"} {
		runs[name] = f.run(name, "")
		pods[name] = f.pod(runs[name])
		f.jobCreated(runs[name])
	}
	release := f.holdWorker(runs["busy-job"], pods["busy-job"])
	for _, name := range []string{"older-run", "newer-run"} {
		f.kubelet(pods[name], corev1.PodSucceeded, exited(0, "Completed", ""), "")
		f.deleteJobAndPod(runs[name], pods[name], metav1.DeletePropagationBackground)
	}
	require.Eventually(t, func() bool {
		return gauge(t, reg, "datajobs_execution_states_dropped_total", "pod") == 1
	}, 30*time.Second, 10*time.Millisecond, "the older run's pod state is dropped past the bound")
	require.InDelta(t, 1, gauge(t, reg, "datajobs_executions_kept", "deleted_pod"), 0, "one is kept")
	release()

	f.status("newer-run", runs["newer-run"], job.ExecSucceeded)
	e := f.status("older-run", runs["older-run"], job.ExecPlatformError)
	require.Contains(t, e.Message, "execution record lost")
	require.InDelta(t, 1, gauge(t, reg, "datajobs_execution_states_dropped_total", "job"), 0)
	require.Contains(t, logs.String(), `"msg":"execution_state_dropped","execution":"`+runs["older-run"]+`"`)
}

// unreachableNode creates a Node whose kubelet does not answer (its port is closed, no
// kwok manages it: a node that went down) and returns its name.
func (f *execFixture) unreachableNode() string {
	f.t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(f.t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(f.t, l.Close())
	name := "down-" + f.ns
	var n *corev1.Node
	_, err = f.client.CoreV1().Nodes().Create(f.t.Context(), &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "datajobs.test/down", Effect: corev1.TaintEffectNoSchedule}}},
	}, metav1.CreateOptions{})
	require.NoError(f.t, err)
	f.t.Cleanup(func() {
		_ = f.client.CoreV1().Nodes().Delete(context.WithoutCancel(f.t.Context()), name, metav1.DeleteOptions{})
	})
	require.NoError(f.t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err = f.client.CoreV1().Nodes().Get(f.t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
		n.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
		_, err = f.client.CoreV1().Nodes().UpdateStatus(f.t.Context(), n, metav1.UpdateOptions{})
		return err
	}))
	return n.Name
}

// bind puts pod p on node, as the scheduler would.
func (f *execFixture) bind(p *corev1.Pod, node string) {
	f.t.Helper()
	require.NoError(f.t, f.client.CoreV1().Pods(f.ns).Bind(f.t.Context(), &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}, metav1.CreateOptions{}))
}

// A finished run's log that cannot be read (its pod's node does not answer) is retried
// while its pod is there, and so stays in the keep of logs to read. On main that keep had
// no bound: a node that never answers held one pod per finished run in memory, forever.
// Past the bound the oldest is not kept, and that is said: its log stays pending, which
// the API answers as not kept (410), never as an empty log.
func TestPastItsBoundALogThatCannotBeReadIsNotKeptAndThatIsSaid(t *testing.T) {
	f := newExecFixture(t)
	f.heldJob("unreadable-1")
	f.heldJob("unreadable-2")
	reg := prometheus.NewRegistry()
	f.startExecutionsWith(tracker.Config{MaxKept: 1, Metrics: tracker.NewMetrics(reg)})
	node := f.unreachableNode()
	var ids []string
	for _, name := range []string{"unreadable-1", "unreadable-2"} {
		id := f.run(name, "")
		p := f.pod(id)
		f.bind(p, node)
		f.kubelet(p, corev1.PodRunning, running(), "")
		f.status(name, id, job.ExecRunning)
		f.kubelet(p, corev1.PodSucceeded, exited(0, "Completed", ""), "")
		f.status(name, id, job.ExecSucceeded)
		ids = append(ids, id)
	}
	require.Eventually(t, func() bool {
		return gauge(t, reg, "datajobs_execution_logs_dropped_total", "") == 1
	}, 30*time.Second, 10*time.Millisecond, "the older log is dropped past the bound")
	require.InDelta(t, 1, gauge(t, reg, "datajobs_executions_kept", "log"), 0, "the newer one is still retried")
	require.Positive(t, gauge(t, reg, "datajobs_execution_logs_unreadable_total", ""), "the pods' node never answers")
	for _, id := range ids {
		logs, pending, ok := f.logRow(id)
		require.True(t, ok)
		require.True(t, pending, "the log of %s is not kept: the API answers 410, not an empty log", id)
		require.Empty(t, logs)
	}
}
