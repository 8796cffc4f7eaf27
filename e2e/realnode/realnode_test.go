package realnode

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/devenv"
	"github.com/datajobs/datajobs/internal/testenv"
)

// TestPrintedLinesShowInLogsWhileRunningAndAfterThePodIsGone guards the promise that
// "the recorded outcome is the truth": the job's own step runs in a real container, as
// the rendered security context says (uid 1000, non-root, seccomp, no token), and what it
// prints is what vdkcli execute --logs shows, while it runs and after its pod is gone.
func TestPrintedLinesShowInLogsWhileRunningAndAfterThePodIsGone(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir())
	const name = "rn-print"
	s.deploy(t, name, map[string]string{"10_print.py": `import os, time

def run(job_input):
    token = os.path.exists("/var/run/secrets/kubernetes.io/serviceaccount/token")
    print(f"realnode-marker uid={os.getuid()} gid={os.getgid()} token={token}", flush=True)
    for _ in range(300):  # until the test has read the live log (it touches nothing: it waits)
        if os.path.exists("/tmp/never"):
            break
        time.sleep(0.1)
        if time.monotonic() > START + 12:
            break
    print("realnode-done", flush=True)

START = time.monotonic()
`})
	id := s.start(t, name)
	s.waitStatus(t, name, id, 2*time.Minute, "running")
	var live string
	require.Eventually(t, func() bool {
		live = s.logs(t, name, id)
		return strings.Contains(live, "realnode-marker")
	}, time.Minute, 500*time.Millisecond, "the live log shows the step's print: %s", live)
	assert.Contains(t, live, "realnode-marker uid=1000 gid=1000 token=False", "the pod runs as the rendered user, without a service-account token")
	assert.NotContains(t, live, "realnode-done", "read while the step still runs")

	e := s.waitStatus(t, name, id, 2*time.Minute, "succeeded", "user_error", "platform_error")
	require.Equal(t, "succeeded", e.Status, "%+v", e)
	pods := s.pods(t, id)
	require.Len(t, pods, 1)
	p := pods[0]
	assert.Equal(t, devenv.RealNodeName, p.Spec.NodeName, "the pod ran on the real node")
	sc := p.Spec.SecurityContext
	require.NotNil(t, sc)
	assert.True(t, *sc.RunAsNonRoot)
	assert.Equal(t, "RuntimeDefault", string(sc.SeccompProfile.Type))
	assert.False(t, *p.Spec.AutomountServiceAccountToken)

	// The Job and its pod go; the log the leader kept is served.
	require.NoError(t, s.kube.BatchV1().Jobs(s.ns).Delete(t.Context(), id, metav1.DeleteOptions{PropagationPolicy: new(metav1.DeletePropagationBackground)}))
	require.Eventually(t, func() bool { return len(s.pods(t, id)) == 0 }, time.Minute, 200*time.Millisecond, "the pod is gone")
	after := s.logs(t, name, id)
	assert.Contains(t, after, "realnode-marker uid=1000")
	assert.Contains(t, after, "realnode-done")
}

// TestARaisingStepIsAUserErrorWithVdkCoresOwnStatus guards against a generic outcome: the
// status and message come from vdk-core's termination message in the real container.
//
// Its contact gets one mail that quotes the end of the traceback: the run's final status
// is recorded before the pod's log is read, and until the event waited for the kept log
// (store.LogTailWait) no mail of a real run had any log line.
func TestARaisingStepIsAUserErrorWithVdkCoresOwnStatus(t *testing.T) {
	t.Parallel()
	mail := testenv.StartMailpit(t, "")
	s := startService(t, t.TempDir(), "--smtp-url", "smtp://"+mail.SMTPAddr, "--smtp-from", "datajobs@example.com")
	const name = "rn-raise"
	s.deploy(t, name, map[string]string{"10_raise.py": "def run(job_input):\n    raise ValueError('realnode-boom')\n"})
	s.mailOnUserError(t, name, "owner@example.com")
	// No retries: with the default 3 the test waited out three back-offs (~90 s).
	require.NoError(t, s.redeploy(name, `"retries":0`, withRetries(0)))
	id := s.start(t, name)
	e := s.waitStatus(t, name, id, 4*time.Minute, "succeeded", "user_error", "platform_error")
	require.Equal(t, "user_error", e.Status, "%+v", e)
	assert.Contains(t, e.Message, "User error (vdk ", "vdk-core's own termination status")
	assert.Contains(t, s.logs(t, name, id), "realnode-boom", "the traceback is in the log")
	var got []testenv.Mail
	require.Eventually(t, func() bool {
		got = testenv.Mails(t, mail.HTTPAddr)
		return len(got) > 0
	}, time.Minute, 500*time.Millisecond, "a mail to the user-error contact")
	require.Len(t, got, 1, "one mail for one failed run")
	assert.Equal(t, "owner@example.com", got[0].To[0].Address)
	assert.Contains(t, got[0].Text, id)
	assert.Contains(t, got[0].Text, "ValueError: realnode-boom", "the log's last lines: the traceback's end")
}

// TestRequirementsFromALocalIndexAreImportedInThePod guards the requirements layer: a
// wheel the builder installed from the service's pip index is importable by the step.
func TestRequirementsFromALocalIndexAreImportedInThePod(t *testing.T) {
	t.Parallel()
	s := startService(t, wheel(t, "rnwheel", "1.2.3"))
	const name = "rn-reqs"
	s.deploy(t, name, map[string]string{
		"requirements.txt": "rnwheel==1.2.3\n",
		"10_import.py":     "import rnwheel\n\ndef run(job_input):\n    print('imported', rnwheel.VALUE, flush=True)\n",
	})
	id := s.start(t, name)
	e := s.waitStatus(t, name, id, 2*time.Minute, "succeeded", "user_error", "platform_error")
	require.Equal(t, "succeeded", e.Status, "%+v", e)
	assert.Contains(t, s.logs(t, name, id), "imported rnwheel 1.2.3")
}

// TestAStepPastItsMemoryLimitIsOOMKilledAndAUserError guards against a killed run being
// recorded as succeeded: the kernel kills it at the rendered limit.
func TestAStepPastItsMemoryLimitIsOOMKilledAndAUserError(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir())
	const name = "rn-oom"
	s.deploy(t, name, map[string]string{"10_oom.py": "def run(job_input):\n    hog = []\n    while True:\n        hog.append(bytearray(16 << 20))\n"})
	// 128Mi: the kernel kills the step within a second of allocation.
	require.NoError(t, s.setMemoryLimit(name, 128))
	id := s.start(t, name)
	e := s.waitStatus(t, name, id, 4*time.Minute, "succeeded", "user_error", "platform_error")
	require.Equal(t, "user_error", e.Status, "%+v", e)
	var oom bool
	for _, p := range s.pods(t, id) {
		for _, c := range p.Status.ContainerStatuses {
			oom = oom || (c.State.Terminated != nil && c.State.Terminated.Reason == "OOMKilled")
		}
	}
	assert.True(t, oom, "the kernel killed it: %s", s.podsOf(t, id))
	assert.Contains(t, e.Message, "ran out of memory", "%+v", e)
}

// TestAStepPastTheDeadlineIsStoppedAndAUserError guards the time limit: a step that sleeps
// past its deployment's timeout_seconds (the Job's activeDeadlineSeconds) is stopped and
// recorded as the product documents (docs/api.md: user_error, "ran longer than its time
// limit"), at the timeout and not at the end of its sleep. What it printed before (without
// a flush: issue 48, item 3, PYTHONUNBUFFERED) is in the log.
func TestAStepPastTheDeadlineIsStoppedAndAUserError(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir())
	const name = "rn-sleep"
	s.deploy(t, name, map[string]string{"10_sleep.py": "import time\n\ndef run(job_input):\n    print('realnode-sleeping')\n    time.sleep(600)\n"})
	require.NoError(t, s.redeploy(name, `"retries":0,"timeout_seconds":20`, func(cj *batchv1.CronJob) bool {
		d := cj.Spec.JobTemplate.Spec.ActiveDeadlineSeconds
		return d != nil && *d == 20
	}))
	id := s.start(t, name)
	start := time.Now()
	e := s.waitStatus(t, name, id, 2*time.Minute, "succeeded", "user_error", "platform_error", "cancelled")
	require.Equal(t, "user_error", e.Status, "%+v", e)
	assert.Contains(t, e.Message, "ran longer than its time limit")
	assert.Less(t, time.Since(start), 90*time.Second, "stopped at its timeout, not at the end of the sleep")
	require.Eventually(t, func() bool { return len(s.pods(t, id)) == 0 || !running(s, id) }, time.Minute, 200*time.Millisecond, "the container is stopped")
	assert.Contains(t, s.logs(t, name, id), "realnode-sleeping", "the print before the sleep survives the kill")
}

// TestCancelStopsTheRunningContainer guards cancel: vdkcli execute --cancel of a running
// step really stops its container, and the execution reads cancelled.
func TestCancelStopsTheRunningContainer(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir())
	const name = "rn-cancel"
	s.deploy(t, name, map[string]string{"10_sleep.py": "import time\n\ndef run(job_input):\n    print('waiting to be cancelled', flush=True)\n    time.sleep(600)\n"})
	id := s.start(t, name)
	s.waitStatus(t, name, id, 2*time.Minute, "running")
	require.Eventually(t, func() bool { return running(s, id) }, time.Minute, 200*time.Millisecond, "the container runs")
	out := s.vdk(t, "execute", "--cancel", "-i", id, "-n", name, "-t", team)
	assert.Contains(t, out, "cancelled successfully")
	s.waitStatus(t, name, id, 2*time.Minute, "cancelled")
	require.Eventually(t, func() bool { return !running(s, id) }, time.Minute, 200*time.Millisecond, "the container was stopped: %s", s.podsOf(t, id))
}

// TestAJobDeletedByHandWhileRunningIsAPlatformError guards issue 48, item 5: someone (not
// a cancel) deletes a running execution's Job; the garbage collector deletes its pod, the
// kubelet stops the container (exit 143), and the tracker recorded that as the job's own
// failure, user_error. A run killed by a delete is never the user's fault.
func TestAJobDeletedByHandWhileRunningIsAPlatformError(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir())
	const name = "rn-deleted"
	s.deploy(t, name, map[string]string{"10_sleep.py": "import time\n\ndef run(job_input):\n    print('waiting to be deleted', flush=True)\n    time.sleep(600)\n"})
	id := s.start(t, name)
	s.waitStatus(t, name, id, 2*time.Minute, "running")
	require.Eventually(t, func() bool { return running(s, id) }, time.Minute, 200*time.Millisecond, "the container runs")
	background := metav1.DeletePropagationBackground
	require.NoError(t, s.kube.BatchV1().Jobs(s.ns).Delete(s.ctx(), id, metav1.DeleteOptions{PropagationPolicy: &background}))
	e := s.waitStatus(t, name, id, 2*time.Minute, "platform_error", "user_error", "succeeded", "cancelled")
	require.Equal(t, "platform_error", e.Status, "a run whose Job was deleted by hand: %+v; pods: %s", e, s.podsOf(t, id))
	assert.Contains(t, e.Message, "was deleted", "the message says why")
}

// running reports whether a container of the execution's pods runs.
func running(s *service, id string) bool {
	l, err := s.kube.CoreV1().Pods(s.ns).List(s.ctx(), metav1.ListOptions{LabelSelector: "job-name=" + id})
	if err != nil {
		return true
	}
	for _, p := range l.Items {
		for _, c := range p.Status.ContainerStatuses {
			if c.State.Running != nil {
				return true
			}
		}
	}
	return false
}

// TestAJobFromTheCronJobIsAScheduledExecutionWithItsRealOutcome guards the scheduled path:
// a Job the CronJob spawns (made here from it, as the controller would at the minute) is
// recorded as a scheduled execution with what its pod really did.
func TestAJobFromTheCronJobIsAScheduledExecutionWithItsRealOutcome(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir())
	const name = "rn-cron"
	s.deploy(t, name, map[string]string{"10_print.py": "def run(job_input):\n    print('scheduled run', flush=True)\n"})
	cj, err := s.kube.BatchV1().CronJobs(s.ns).Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	id := name + "-" + time.Now().UTC().Format("0601021504")
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: id, Namespace: s.ns, Labels: cj.Spec.JobTemplate.Labels, Annotations: cj.Spec.JobTemplate.Annotations,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "CronJob", Name: cj.Name, UID: cj.UID, Controller: new(true)}},
		},
		Spec: cj.Spec.JobTemplate.Spec,
	}
	_, err = s.kube.BatchV1().Jobs(s.ns).Create(t.Context(), j, metav1.CreateOptions{})
	require.NoError(t, err)
	var e execution
	require.Eventually(t, func() bool {
		e = s.executionOrZero(name, id)
		return e.Status == "succeeded" || e.Status == "user_error" || e.Status == "platform_error"
	}, 3*time.Minute, 500*time.Millisecond, "the scheduled execution %s finishes: %+v", id, &e)
	require.Equal(t, "succeeded", e.Status, "%+v", e)
	assert.Equal(t, "scheduled", e.Type)
	assert.Contains(t, s.logs(t, name, id), "scheduled run")
}
