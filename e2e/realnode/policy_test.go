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
)

// TestRetriesRunAFailedStepAgainOnANewPod guards the retries policy: with retries 1 a
// step that fails is run a second time, on a new pod of the same Job, and only then is
// the execution a user error (with retries 0, TestARaisingStepIsAUserErrorWithVdkCoresOwnStatus
// sees one pod).
func TestRetriesRunAFailedStepAgainOnANewPod(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir())
	const name = "rn-retry"
	s.deploy(t, name, map[string]string{"10_fail.py": "def run(job_input):\n    print('attempt', flush=True)\n    raise ValueError('realnode-retry')\n"})
	require.NoError(t, s.redeploy(name, `"retries":1`, withRetries(1)))
	id := s.start(t, name)
	e := s.waitStatus(t, name, id, 4*time.Minute, "succeeded", "user_error", "platform_error")
	require.Equal(t, "user_error", e.Status, "%+v", e)
	failed := 0
	for _, p := range s.pods(t, id) {
		if p.Status.Phase == corev1.PodFailed {
			failed++
		}
	}
	assert.Equal(t, 2, failed, "the first attempt and its one retry ran and failed: %s", s.podsOf(t, id))
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
