package realnode

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/kube"
)

// TestAUserErrorFailsAtOnceAtTheDefaultPolicy guards issue 48, item 2: at the default
// 3 retries a step raising ValueError ran four times (114 s) before it was reported. The
// base image's plugin exits 65 on vdk-core's user blame and the Job's podFailurePolicy
// fails the Job at once: one pod, one attempt, user_error.
func TestAUserErrorFailsAtOnceAtTheDefaultPolicy(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir())
	const name = "rn-failfast"
	s.deploy(t, name, map[string]string{"10_fail.py": "def run(job_input):\n    print('attempt', flush=True)\n    raise ValueError('realnode-failfast')\n"})
	id := s.start(t, name)
	start := time.Now()
	e := s.waitStatus(t, name, id, 4*time.Minute, "succeeded", "user_error", "platform_error")
	t.Logf("start to user_error: %s", time.Since(start).Round(100*time.Millisecond))
	require.Equal(t, "user_error", e.Status, "%+v", e)
	assert.Contains(t, e.Message, "not retried", "%+v", e)
	pods := s.pods(t, id)
	require.Len(t, pods, 1, "not retried: %s", s.podsOf(t, id))
	require.NotEmpty(t, pods[0].Status.ContainerStatuses)
	term := pods[0].Status.ContainerStatuses[0].State.Terminated
	require.NotNil(t, term, s.podsOf(t, id))
	assert.Equal(t, int32(65), term.ExitCode, "the plugin's user-error code")
	assert.Contains(t, s.logs(t, name, id), "realnode-failfast")
}

// TestAPlatformErrorIsRetriedAndEveryAttemptsLogKept guards the other half of the
// policy: an error vdk-core blames on the platform (exit 70) is run again on a new pod, up
// to the retries, and the log kept holds what each attempt printed, in order.
func TestAPlatformErrorIsRetriedAndEveryAttemptsLogKept(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir())
	const name = "rn-retry"
	s.deploy(t, name, map[string]string{"10_fail.py": `import os
from vdk.internal.core import errors

def run(job_input):
    print("attempt of pod", os.environ["VDK_ATTEMPT_ID"])
    e = RuntimeError("realnode-platform")
    errors.set_exception_resolvable_by(e, errors.ResolvableBy.PLATFORM_ERROR)
    raise e
`})
	require.NoError(t, s.redeploy(name, `"retries":1`, withRetries(1)))
	id := s.start(t, name)
	e := s.waitStatus(t, name, id, 4*time.Minute, "succeeded", "user_error", "platform_error")
	require.Equal(t, "platform_error", e.Status, "%+v", e)
	assert.Contains(t, e.Message, "It ran 2 attempts", "%+v", e)
	var failed []string
	for _, p := range s.pods(t, id) {
		if p.Status.Phase == corev1.PodFailed {
			failed = append(failed, p.Name)
		}
	}
	require.Len(t, failed, 2, "the first attempt and its one retry ran and failed: %s", s.podsOf(t, id))
	logs := s.logs(t, name, id)
	for i, pod := range kubeAttempts(s.pods(t, id)) {
		assert.Contains(t, logs, fmt.Sprintf("=== datajobs: attempt %d of 2, pod %s, exit code 70 ===", i+1, pod.Name))
		assert.Contains(t, logs, "attempt of pod "+pod.Name, "each attempt's own print is kept")
	}
}

// TestForbidRefusesASecondRunAndAllowRunsTwoAtOnce guards concurrency_policy for runs
// started through the API: Forbid (the default) answers 409 while a run is active, Allow
// starts a second one, and both containers run at the same time on the node.
func TestForbidRefusesASecondRunAndAllowRunsTwoAtOnce(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir())
	const name = "rn-concurrency"
	s.deploy(t, name, map[string]string{"10_sleep.py": "import time\n\ndef run(job_input):\n    time.sleep(600)\n"})
	first := s.start(t, name)
	s.waitStatus(t, name, first, 2*time.Minute, "running")
	require.Equal(t, http.StatusConflict, s.post(t, name, "/deployments/production/executions", `{}`), "Forbid refuses a second run")

	require.NoError(t, s.redeploy(name, `"concurrency_policy":"Allow"`, func(cj *batchv1.CronJob) bool {
		return cj.Spec.ConcurrencyPolicy == batchv1.AllowConcurrent
	}))
	second := s.start(t, name)
	require.NotEqual(t, first, second)
	require.Eventually(t, func() bool { return running(s, first) && running(s, second) }, 2*time.Minute, 200*time.Millisecond,
		"both runs' containers run at once: %s / %s", s.podsOf(t, first), s.podsOf(t, second))
	for _, id := range []string{first, second} {
		s.vdk(t, "execute", "--cancel", "-i", id, "-n", name, "-t", team)
	}
}

// post sends body to the job's path suffix and returns the status.
func (s *service) post(t *testing.T, name, suffix, body string) int {
	t.Helper()
	resp, err := http.Post(s.base+"/data-jobs/for-team/"+team+"/jobs/"+name+suffix, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// TestATimeZoneMovesTheScheduledRun guards time_zone: a schedule for the next minute of
// the wall clock in Asia/Kathmandu (UTC+05:45, so never the same minute in UTC) fires
// there, which it would not if the CronJob read it in UTC.
func TestATimeZoneMovesTheScheduledRun(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir())
	const name = "rn-zone"
	s.deploy(t, name, map[string]string{"10_print.py": "def run(job_input):\n    print('zoned run', flush=True)\n"})
	zone, err := time.LoadLocation("Asia/Kathmandu")
	require.NoError(t, err)
	at := time.Now().In(zone).Add(time.Minute).Truncate(time.Minute)
	if time.Until(at) < 20*time.Second {
		at = at.Add(time.Minute) // leave the apply time to land before the minute
	}
	schedule := fmt.Sprintf("%d %d * * *", at.Minute(), at.Hour())
	require.NoError(t, s.redeploy(name, fmt.Sprintf(`"retries":0,"time_zone":"Asia/Kathmandu","schedule":{"schedule_cron":%q}`, schedule), func(cj *batchv1.CronJob) bool {
		return cj.Spec.TimeZone != nil && *cj.Spec.TimeZone == "Asia/Kathmandu" && cj.Spec.Schedule == schedule
	}))
	id := fmt.Sprintf("%s-%d", name, at.Unix()/60) // the CronJob controller's name of that run
	var e execution
	require.Eventually(t, func() bool {
		e = s.executionOrZero(name, id)
		return e.Status == "succeeded" || e.Status == "user_error" || e.Status == "platform_error"
	}, time.Until(at)+2*time.Minute, 500*time.Millisecond, "the run scheduled at %s in Asia/Kathmandu (%s UTC) ran: %+v", at, at.UTC(), &e)
	assert.Equal(t, "scheduled", e.Type)
	assert.Equal(t, "succeeded", e.Status, "%+v", e)
}

// TestConfigINISetsTheRunPolicyThroughVdkDeploy guards the run policy the VDK way: keys
// of config.ini's [job] section, uploaded by vdkcli deploy (which cannot send the body's
// fields), reach the CronJob.
func TestConfigINISetsTheRunPolicyThroughVdkDeploy(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir())
	const name = "rn-config"
	s.deploy(t, name, map[string]string{
		"config.ini":  configINI("3.11") + "retries = 0\ntimeout_seconds = 600\n",
		"10_print.py": "def run(job_input):\n    print('configured', flush=True)\n",
	})
	cj, err := s.kube.BatchV1().CronJobs(s.ns).Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	spec := cj.Spec.JobTemplate.Spec
	assert.Equal(t, int32(0), *spec.BackoffLimit, "config.ini's retries")
	assert.Equal(t, int64(600), *spec.ActiveDeadlineSeconds, "config.ini's timeout_seconds")
}

// kubeAttempts orders pods as the log does: oldest first.
func kubeAttempts(pods []corev1.Pod) []*corev1.Pod {
	ptrs := make([]*corev1.Pod, len(pods))
	for i := range pods {
		ptrs[i] = &pods[i]
	}
	return kube.Attempts(ptrs)
}
