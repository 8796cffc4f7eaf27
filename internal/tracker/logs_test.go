package tracker_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/datajobs/datajobs/internal/devenv"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/testenv"
)

// keptLog reads the kept log of an execution; ok is false while none is kept (none, or
// a pending one).
func (f *execFixture) keptLog(id string) (logs string, ok bool) {
	logs, pending, ok := f.logRow(id)
	return logs, ok && !pending
}

// logRow reads the log row of an execution; ok is false while it has none.
func (f *execFixture) logRow(id string) (logs string, pending, ok bool) {
	f.t.Helper()
	conn, err := pgx.Connect(f.t.Context(), f.dbURL)
	require.NoError(f.t, err)
	defer conn.Close(context.WithoutCancel(f.t.Context()))
	err = conn.QueryRow(f.t.Context(), `SELECT logs, pending FROM data_job_execution_log WHERE execution_id = $1`, id).Scan(&logs, &pending)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, false
	}
	require.NoError(f.t, err)
	return logs, pending, true
}

// printingPod puts the execution's pod on kwok's node, left to the test as kubelet, with
// kwok serving lines as its log.
func (f *execFixture) printingPod(p *corev1.Pod, lines ...string) {
	f.t.Helper()
	hands := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, devenv.KwokHandsOffAnnotation, devenv.KwokHandsOffValue)
	_, err := f.client.CoreV1().Pods(f.ns).Patch(f.t.Context(), p.Name, types.StrategicMergePatchType, []byte(hands), metav1.PatchOptions{})
	require.NoError(f.t, err)
	require.NoError(f.t, f.client.CoreV1().Pods(f.ns).Bind(f.t.Context(), &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: f.ns},
		Target:     corev1.ObjectReference{Kind: "Node", Name: devenv.FakeNodeName},
	}, metav1.CreateOptions{}))
	file := filepath.Join(f.t.TempDir(), p.Name+".log")
	require.NoError(f.t, devenv.WriteCRILog(file, time.Now(), lines...))
	require.NoError(f.t, devenv.ServePodLog(f.t.Context(), testenv.RestConfig(f.t), p, file))
}

// printingRun starts the executions and a run of a new held job whose pod runs printing
// lines (runningAndPrinting).
func (f *execFixture) printingRun(name string, lines ...string) (string, *corev1.Pod) {
	f.t.Helper()
	f.heldJob(name)
	f.startExecutions()
	id := f.run(name, "")
	return id, f.runningAndPrinting(name, id, lines...)
}

// runningAndPrinting makes the first pod of execution id of job name run printing lines,
// and waits until the execution is recorded running and kwok serves the lines (it sees the
// Logs object a moment after it is created).
func (f *execFixture) runningAndPrinting(name, id string, lines ...string) *corev1.Pod {
	f.t.Helper()
	p := f.pod(id)
	f.printingPod(p, lines...)
	f.kubelet(p, corev1.PodRunning, running(), "")
	f.status(name, id, job.ExecRunning)
	want := strings.Join(lines, "\n") + "\n"
	require.Eventually(f.t, func() bool {
		s, err := f.client.CoreV1().Pods(f.ns).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(f.t.Context())
		return err == nil && string(s) == want
	}, 30*time.Second, 50*time.Millisecond, "kwok serves the log of %s", p.Name)
	return p
}

func TestTheLogIsKeptAfterTheFinalStatusAndByTheNextTermWhenItWasNot(t *testing.T) {
	f := newExecFixture(t)
	id, p := f.printingRun("log-job", "hello", "bye")

	f.kubelet(p, corev1.PodSucceeded, exited(0, "Completed", ""), "")
	f.status("log-job", id, job.ExecSucceeded)
	require.Equal(t, "hello\nbye\n", f.eventuallyKeptLog(id), "the log is kept")

	// A leader that stopped between the final status and the log: the next one keeps it.
	f.stopExecutions()
	f.exec(`DELETE FROM data_job_execution_log WHERE execution_id = '` + id + `'`)
	f.startExecutions()
	require.Equal(t, "hello\nbye\n", f.eventuallyKeptLog(id), "the next term keeps the missing log")
}

// A Job deleted by hand the moment it finished took its pod, and the log with it, before
// the leader read the log: the API answered an empty log. Here no leader watches while the
// pod succeeds and is deleted; the next one records the outcome from the Job and marks the
// log pending (not kept), not empty, and keeps nothing in its place.
func TestAFinishedRunWhosePodWentBeforeItsLogWasReadHasItsLogPendingNotEmpty(t *testing.T) {
	f := newExecFixture(t)
	id, p := f.printingRun("gone-job", "printed, then lost")

	f.stopExecutions()
	f.kubelet(p, corev1.PodSucceeded, exited(0, "Completed", ""), "")
	require.NoError(t, f.client.CoreV1().Pods(f.ns).Delete(t.Context(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
	require.Eventually(t, func() bool {
		_, err := f.client.CoreV1().Pods(f.ns).Get(t.Context(), p.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 30*time.Second, 20*time.Millisecond, "the pod is gone")
	require.Eventually(t, func() bool { return f.job(id).Status.Succeeded == 1 }, 30*time.Second, 20*time.Millisecond,
		"the Job controller counted the pod")
	f.startExecutions()
	f.status("gone-job", id, job.ExecSucceeded)
	logs, pending, ok := f.logRow(id)
	require.True(t, ok, "the final status's statement wrote the log's row")
	require.True(t, pending, "its log is pending: the API answers it was not kept")
	require.Empty(t, logs)
}

// eventuallyKeptLog waits until the log of execution id is kept, and returns it.
func (f *execFixture) eventuallyKeptLog(id string) string {
	f.t.Helper()
	var logs string
	require.Eventually(f.t, func() bool {
		var ok bool
		logs, ok = f.keptLog(id)
		return ok
	}, 30*time.Second, 20*time.Millisecond, "the log of %s is kept", id)
	return logs
}

// Issue 48, item 3: only the last attempt's log was kept, and nothing said there were
// more. A run whose first attempt failed (the platform's error, so it is retried) and
// whose second succeeded keeps both logs, in order, each under its attempt's header, and
// its message counts the attempts.
func TestEveryAttemptsLogIsKeptInOrder(t *testing.T) {
	f := newExecFixture(t)
	f.heldJob("retry-job")
	cj, err := f.client.BatchV1().CronJobs(f.ns).Get(t.Context(), "retry-job", metav1.GetOptions{})
	require.NoError(t, err)
	cj.Spec.JobTemplate.Spec.BackoffLimit = new(int32(1))
	_, err = f.client.BatchV1().CronJobs(f.ns).Update(t.Context(), cj, metav1.UpdateOptions{})
	require.NoError(t, err)
	f.startExecutions()
	id := f.run("retry-job", "")
	first := f.runningAndPrinting("retry-job", id, "first attempt")
	f.kubelet(first, corev1.PodFailed, exited(70, "Error", `{"status": "Platform error"}`), "")

	var second *corev1.Pod
	require.Eventually(t, func() bool {
		pods, err := f.client.CoreV1().Pods(f.ns).List(t.Context(), metav1.ListOptions{LabelSelector: kube.LabelJobName + "=" + id})
		require.NoError(t, err)
		for i := range pods.Items {
			if pods.Items[i].Name != first.Name {
				second = &pods.Items[i]
			}
		}
		return second != nil
	}, time.Minute, 50*time.Millisecond, "the Job controller retries with a second pod")
	f.printingPod(second, "second attempt")
	f.kubelet(second, corev1.PodRunning, running(), "")
	f.kubelet(second, corev1.PodSucceeded, exited(0, "Completed", ""), "")
	e := f.status("retry-job", id, job.ExecSucceeded)
	require.Contains(t, e.Message, "It ran 2 attempts")
	require.Equal(t, "=== datajobs: attempt 1 of 2, pod "+first.Name+", exit code 70 ===\nfirst attempt\n"+
		"=== datajobs: attempt 2 of 2, pod "+second.Name+", exit code 0 ===\nsecond attempt\n", f.eventuallyKeptLog(id))
}
