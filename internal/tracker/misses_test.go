package tracker_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
)

// TestMissedScheduleTimesAreSkippedRowsAndTheLatestAreCaughtUp guards the hole a team did
// not see: a CronJob applied 10 minutes ago (every minute, 10 s starting deadline) whose
// controller started none of those runs (an outage) gets one execution per missed minute:
// the latest catch_up (2) are started late by the leader, with their logical time in the
// arguments and the environment, the others are skipped with the reason.
func TestMissedScheduleTimesAreSkippedRowsAndTheLatestAreCaughtUp(t *testing.T) {
	t.Parallel()
	f := newExecFixture(t)
	const name = "missed-job"
	f.heldJob(name)
	f.patch(name, job.DeploymentChange{Schedule: ptr("* * * * *"), Policy: job.PolicyChange{
		StartingDeadlineSeconds: ptr(int64(10)), CatchUp: ptr(2),
	}})
	applied := time.Now().Add(-10 * time.Minute).Truncate(time.Minute).Add(30 * time.Second)
	f.exec(fmt.Sprintf(`INSERT INTO actual_data_job_deployment (data_job_name, job_uid, generation, team,
		deployment_version_sha, git_commit_sha, vdk_version, python_version, schedule, enabled, last_deployed_by, last_deployed_date,
		resources_cpu_request_millis, resources_cpu_limit_millis, resources_memory_request_bytes, resources_memory_limit_bytes)
	SELECT j.name, j.uid, j.generation, j.team, 'h', 'v1', '', '3.11', '* * * * *', true, 'alice', '%s', 1000, 2000, 524288000, 1048576000
	FROM data_job j WHERE j.name = '%s'`, applied.Format(time.RFC3339), name))
	horizon := time.Now().Add(-10*time.Second - time.Minute)
	want, err := job.ScheduleTimes("* * * * *", "", applied, horizon, 100)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(want), 8)
	f.startExecutions()

	latest := want[len(want)-2:]
	for _, at := range latest {
		id := job.ScheduledRunID(name, at)
		f.eventually(func() bool { return f.job(id) != nil }, "the catch-up run "+id+" has a Job")
		env := f.job(id).Spec.Template.Spec.Containers[0].Env
		var logical string
		for _, e := range env {
			if e.Name == kube.EnvLogicalTime {
				logical = e.Value
			}
		}
		require.Equal(t, at.UTC().Format(time.RFC3339), logical)
		e := f.execution(name, id)
		require.Equal(t, job.ExecScheduled, e.Type)
		require.Equal(t, "catch-up", e.StartedBy)
	}
	for _, at := range want[:len(want)-2] {
		id := job.ScheduledRunID(name, at)
		f.eventually(func() bool {
			e, err := f.svc.GetExecution(t.Context(), team, name, id)
			return err == nil && e.Status == string(job.ExecSkipped)
		}, "the missed run "+id+" is a skipped row")
		e := f.execution(name, id)
		require.Contains(t, e.Message, "starting deadline of 10 s")
		_, err := f.client.BatchV1().Jobs(f.ns).Get(t.Context(), id, metav1.GetOptions{})
		require.Error(t, err, "a skipped run has no Job")
	}
}
