package realnode

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
)

// TestAHashedScheduleRunsAtItsResolvedMinute is issue 45's real-node test: a deployment
// whose schedule says H(a-b) in its minute field is answered with the minute datajobs
// resolved for the job (schedule_cron_resolved, within a-b), its CronJob runs that, and
// the CronJob controller starts the run at that minute, which the tracker records as the
// job's scheduled execution with its real outcome. The range is the next three minutes, so
// the test waits for a real schedule for at most about four.
func TestAHashedScheduleRunsAtItsResolvedMinute(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir())
	const name = "rn-hashed"
	s.deploy(t, name, map[string]string{"10_print.py": "def run(job_input):\n    print('hashed run', flush=True)\n"})
	from := time.Now().UTC().Add(time.Minute).Truncate(time.Minute)
	if time.Until(from) < 20*time.Second {
		from = from.Add(time.Minute) // leave the apply time to land before the minute
	}
	if from.Minute() > 57 {
		from = from.Truncate(time.Hour).Add(time.Hour) // a range within one hour
	}
	sent := fmt.Sprintf("H(%d-%d) * * * *", from.Minute(), from.Minute()+2)
	require.NoError(t, s.redeploy(name, fmt.Sprintf(`"retries":0,"schedule":{"schedule_cron":%q}`, sent), func(cj *batchv1.CronJob) bool {
		return strings.HasSuffix(cj.Spec.Schedule, " * * * *") && !strings.Contains(cj.Spec.Schedule, "H") && cj.Spec.Schedule != "0 0 1 1 *"
	}))
	var d struct {
		Schedule struct {
			Sent     string `json:"schedule_cron"`
			Resolved string `json:"schedule_cron_resolved"`
		} `json:"schedule"`
	}
	s.getJSON(t, "/data-jobs/for-team/"+team+"/jobs/"+name+"/deployments/production", &d)
	require.Equal(t, sent, d.Schedule.Sent, "the schedule as sent")
	minute, err := strconv.Atoi(strings.Fields(d.Schedule.Resolved + " ")[0])
	require.NoError(t, err, "resolved schedule %q", d.Schedule.Resolved)
	require.GreaterOrEqual(t, minute, from.Minute(), "resolved %q within %s", d.Schedule.Resolved, sent)
	require.LessOrEqual(t, minute, from.Minute()+2, "resolved %q within %s", d.Schedule.Resolved, sent)

	at := from.Add(time.Duration(minute-from.Minute()) * time.Minute)
	id := fmt.Sprintf("%s-%d", name, at.Unix()/60) // the CronJob controller's name of that run
	var e execution
	require.Eventually(t, func() bool {
		e = s.executionOrZero(name, id)
		return e.Status == "succeeded" || e.Status == "user_error" || e.Status == "platform_error"
	}, time.Until(at)+2*time.Minute, 500*time.Millisecond, "the run of %s at its resolved minute %s ran: %+v", d.Schedule.Resolved, at, &e)
	assert.Equal(t, "scheduled", e.Type)
	assert.Equal(t, "succeeded", e.Status, "%+v", e)
	assert.Contains(t, s.logs(t, name, id), "hashed run")
}
