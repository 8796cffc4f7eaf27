package ui_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/store"
)

// applied records, as the synchronizer leader does, that the job's deployment is in the
// cluster since at.
func (e *env) applied(t *testing.T, name string, at time.Time) {
	t.Helper()
	ctx := t.Context()
	epoch, ok, err := e.store.TryAcquireLease(ctx, store.SyncLeaseName, "test", time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	st, err := e.store.LoadSyncState(ctx, name)
	require.NoError(t, err)
	d := st.Desired
	wrote, err := e.store.RecordAppliedAll(ctx, job.Fence{Epoch: epoch}, []job.ActualDeployment{{
		JobName: name, JobUID: st.Job.UID, Generation: st.Job.Generation, Team: st.Job.Team, DeploymentVersionSHA: "sha",
		JobVersion: d.JobVersion, VDKVersion: d.VDKVersion, PythonVersion: d.PythonVersion, Schedule: d.Schedule,
		Enabled: d.Enabled, DeployedBy: d.DeployedBy, DeployedDate: at,
	}})
	require.NoError(t, err)
	require.Equal(t, []bool{true}, wrote)
}

// The team health page counts the team's jobs by status, lists the failing ones and the
// late ones (a schedule time more than the job's delay ago with no run started since,
// from what is stored), and counts the last 24 hours' runs by outcome; nothing of another
// team (guards: a late job noticed only by its users; a health page that leaks or mixes
// teams).
func TestTeamHealthPageShowsFailingAndLateJobsAndTheDaysRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	ctx := t.Context()
	v1, every5 := "v1", "*/5 * * * *"
	for _, name := range []string{"late-b", "ontime-b", "failing-b"} {
		_, err := e.svc.CreateJob(ctx, "team-b", job.Job{Name: name, Schedule: every5, NotificationDelayPeriodMinutes: 10})
		require.NoError(t, err)
	}
	for _, name := range []string{"late-b", "ontime-b"} {
		_, err := e.svc.Deploy(ctx, "team-b", name, job.DeploymentChange{JobVersion: &v1, Schedule: &every5}, "bob")
		require.NoError(t, err)
		e.applied(t, name, time.Now().Add(-2*time.Hour))
	}
	// ontime-b's last run started a minute ago; late-b has none since its CronJob was made.
	e.sql(t, `INSERT INTO data_job_execution (id, job_name, type, status, op_id, start_time, end_time) VALUES
		('ontime-1', 'ontime-b', 'scheduled', 'succeeded', 'o1', now() - interval '1 minute', now()),
		('late-old', 'late-b', 'scheduled', 'succeeded', 'l0', now() - interval '3 hours', now() - interval '3 hours'),
		('late-sub', 'late-b', 'scheduled', 'submitted', 'l1', now() - interval '5 minutes', NULL),
		('failing-1', 'failing-b', 'manual', 'platform_error', 'f1', now() - interval '2 hours', now() - interval '2 hours'),
		('failing-0', 'failing-b', 'manual', 'user_error', 'f0', now() - interval '30 hours', now() - interval '30 hours')`)
	e.sql(t, `UPDATE data_job SET last_execution_status = 'platform_error', last_execution_end_time = now() - interval '2 hours' WHERE name = 'failing-b'`)
	e.sql(t, `UPDATE data_job SET last_execution_status = 'user_error', last_execution_end_time = now() WHERE name = 'job-of-a'`)

	b := e.browser(t)
	page := b.get("/ui/teams/team-b/health")
	require.Equal(t, http.StatusOK, page.status, page.body)
	failing := section(t, page.body, `id="failing-h"`)
	assert.Contains(t, failing, `href="/ui/teams/team-b/jobs/failing-b">failing-b</a>`)
	assert.Contains(t, failing, "platform error")
	assert.NotContains(t, failing, "job-of-a", "team-a's failing job is not team-b's")

	late := section(t, page.body, `id="late-h"`)
	assert.Contains(t, late, `>late-b</a>`, "no run started since its CronJob was made: a submitted run that never started does not count")
	assert.NotContains(t, late, "ontime-b")
	assert.Contains(t, late, "UTC</time>", "the due time on the schedule's clock, with its zone")
	assert.Contains(t, late, "<td data-label=\"Delay\">10m</td>")

	byStatus := section(t, page.body, `id="bystatus-h"`)
	assert.Contains(t, byStatus, `4 jobs`)
	assert.Contains(t, byStatus, `<span class="pill s-pending">pending</span></a> <strong>1</strong>`, "job-of-b")
	assert.Contains(t, byStatus, `<span class="pill s-not_deployed">not deployed</span></a> <strong>1</strong>`, "failing-b")
	assert.Contains(t, byStatus, `<span class="pill s-synced">synced</span></a> <strong>2</strong>`, "late-b and ontime-b")
	assert.Contains(t, byStatus, `href="/ui/?deployment=not_deployed&amp;team=team-b"`, "each count links to the list of its jobs")

	runs := section(t, page.body, `id="runs-h"`)
	assert.Contains(t, runs, `<span class="pill e-platform_error">platform error</span> <strong>1</strong>`)
	assert.Contains(t, runs, `<span class="pill e-succeeded">succeeded</span> <strong>2</strong>`, "ontime-b's and late-b's of 3 hours ago")
	assert.Contains(t, runs, `<span class="pill e-submitted">submitted</span> <strong>2</strong>`, "job-of-b's run and late-b's, under way")
	assert.NotContains(t, runs, "user error", "failing-b's user_error ended 30 hours ago")

	other := b.get("/ui/teams/team-a/health")
	require.Equal(t, http.StatusOK, other.status)
	for _, name := range []string{"late-b", "ontime-b", "failing-b", "job-of-b"} {
		assert.NotContains(t, other.body, name)
	}
	assert.Contains(t, other.body, `>job-of-a</a>`, "team-a's failing job")
}
