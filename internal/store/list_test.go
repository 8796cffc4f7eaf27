package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testenv"
)

// TestJobsListFiltersByTheStatusItShows puts one job in each deployment status the way
// the synchronizer and the API do, and checks that the list shows each job's status as
// the REST API reports it, and that filtering on a status returns exactly its job.
func TestJobsListFiltersByTheStatusItShows(t *testing.T) {
	t.Parallel()
	st := testenv.Store(t)
	ctx := t.Context()
	epoch, ok, err := st.TryAcquireLease(ctx, store.SyncLeaseName, "test", time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	fence := job.Fence{Epoch: epoch}
	deployed := func(name string) job.Job {
		createJob(t, st, "team-a", name, "")
		deploy(t, st, "team-a", name)
		s, err := st.LoadSyncState(ctx, name)
		require.NoError(t, err)
		return *s.Job
	}
	applied := func(name string) job.Job {
		j := deployed(name)
		wrote, err := st.RecordAppliedAll(ctx, fence, []job.ActualDeployment{{
			JobName: name, JobUID: j.UID, Generation: j.Generation, Team: "team-a", DeploymentVersionSHA: "h",
			JobVersion: "v1", PythonVersion: "3.9", Enabled: true, DeployedBy: "me", DeployedDate: time.Now(),
		}})
		require.NoError(t, err)
		require.Equal(t, []bool{true}, wrote)
		return j
	}
	failed := func(name string, status job.SyncStatus) {
		j := deployed(name)
		wrote, err := st.RecordUnappliedStatus(ctx, fence, name, j.UID, j.Generation, status, "why")
		require.NoError(t, err)
		require.True(t, wrote)
	}

	createJob(t, st, "team-a", "not-deployed", "")
	deployed("pending")
	applied("synced")
	// Synced at an older generation of the job: the result says nothing about the current one.
	applied("synced-then-changed")
	_, err = st.UpdateJob(ctx, "team-a", "synced-then-changed", func(cur job.Job) (job.Job, bool, error) {
		cur.Description = "changed"
		return cur, true, nil
	})
	require.NoError(t, err)
	failed("user-error", job.StatusUserError)
	failed("platform-error", job.StatusPlatformError)
	failed("building", job.StatusBuilding)
	applied("deleting")
	require.NoError(t, st.DeleteDeployment(ctx, "team-a", "deleting"))
	want := map[string]job.SyncStatus{
		"not-deployed": "", "pending": job.StatusPending, "synced": job.StatusSynced, "synced-then-changed": job.StatusPending,
		"user-error": job.StatusUserError, "platform-error": job.StatusPlatformError, "building": job.StatusBuilding,
		"deleting": job.StatusDeleting,
	}

	list := func(status job.SyncStatus) job.ListPage {
		t.Helper()
		page, err := st.ListJobs(ctx, job.ListRequest{
			Filter: job.ListFilter{Visible: job.AllTeams, Status: status}, Sort: []job.SortKey{{Field: job.FieldName}},
			Limit: 50, Count: true, WithDeployments: true,
		}, nil)
		require.NoError(t, err)
		return page
	}
	svc, err := service.New(service.Config{SupportedPythonVersions: []string{"3.9"}}, st)
	require.NoError(t, err)
	all := list("")
	require.Len(t, all.Jobs, len(want))
	for _, l := range all.Jobs {
		require.Equal(t, want[l.Job.Name], l.Status, "the status the list shows of %s", l.Job.Name)
		if v, err := svc.GetDeployment(ctx, "team-a", l.Job.Name); err == nil {
			require.Equal(t, v.Status, l.Status, "%s: the list shows what the REST API reports", l.Job.Name)
		} else {
			require.Empty(t, l.Status, "%s has no deployment", l.Job.Name)
		}
	}
	for _, status := range job.SyncStatuses() {
		var wantNames []string
		for name, s := range want {
			if string(s) == status {
				wantNames = append(wantNames, name)
			}
		}
		page := list(job.SyncStatus(status))
		require.ElementsMatch(t, wantNames, names(page), "status %s", status)
		require.Equal(t, len(wantNames), page.Total, "status %s", status)
		for _, l := range page.Jobs {
			require.Equal(t, status, string(l.Status))
		}
	}
}

// TestJobsListSortsByTheNextRunTheConsoleShows sorts on the next run of the deployment's
// schedule while it is enabled: a disabled or undeployed job has none and comes last,
// whatever its job configuration's schedule says; each in its run policy's time zone (a
// schedule read in UTC would put "in-sofia" third: guards a sort by the wrong clock).
func TestJobsListSortsByTheNextRunTheConsoleShows(t *testing.T) {
	t.Parallel()
	st := testenv.Store(t)
	ctx := t.Context()
	add := func(name, jobSchedule, deploymentSchedule, tz string, enabled bool) {
		_, err := st.CreateJob(ctx, job.Job{Name: name, Team: "team-a", Schedule: jobSchedule})
		require.NoError(t, err)
		if deploymentSchedule == "" {
			return
		}
		_, err = st.ChangeDeployment(ctx, "team-a", name, func(_ job.Job, _ *job.Deployment) (job.Deployment, error) {
			return job.Deployment{
				JobVersion: "v1", PythonVersion: "3.9", Schedule: deploymentSchedule, Enabled: enabled,
				DeployedBy: "me", DeployedDate: time.Now(), Policy: job.RunPolicy{TimeZone: tz},
			}, nil
		})
		require.NoError(t, err)
	}
	// From midnight: the job configurations' schedules would put the two that do not run
	// first.
	add("runs-first", "0 5 * * *", "0 1 * * *", "", true)
	add("runs-second", "0 2 * * *", "0 2 * * *", "UTC", true)
	add("in-sofia", "0 2 * * *", "30 2 * * *", "Europe/Sofia", true) // 00:30 UTC in winter
	add("disabled", "30 0 * * *", "30 0 * * *", "", false)
	add("not-deployed", "15 0 * * *", "", "", false)

	svc, err := service.New(service.Config{SupportedPythonVersions: []string{"3.9"}}, st)
	require.NoError(t, err)
	for _, tt := range []struct {
		desc bool
		want []string
	}{
		{false, []string{"in-sofia", "runs-first", "runs-second", "disabled", "not-deployed"}},
		{true, []string{"runs-second", "runs-first", "in-sofia", "disabled", "not-deployed"}},
	} {
		page, err := svc.ListJobs(ctx, job.ListRequest{
			Filter: job.ListFilter{Visible: job.AllTeams}, Sort: []job.SortKey{{Field: job.FieldDeploymentNextRun, Desc: tt.desc}},
			Limit: 10, WithDeployments: true, At: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC),
		})
		require.NoError(t, err)
		require.Equal(t, tt.want, names(page), "descending: %v", tt.desc)
	}
}
