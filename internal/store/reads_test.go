package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testenv"
)

func createJob(t *testing.T, st *store.Store, team, name, description string) job.Job {
	t.Helper()
	j, err := st.CreateJob(t.Context(), job.Job{Name: name, Team: team, Description: description})
	require.NoError(t, err)
	return j
}

func deploy(t *testing.T, st *store.Store, team, name string) {
	t.Helper()
	_, err := st.ChangeDeployment(t.Context(), team, name, func(_ job.Job, _ *job.Deployment) (job.Deployment, error) {
		return job.Deployment{JobVersion: "v1", PythonVersion: "3.9", Enabled: true, DeployedBy: "me", DeployedDate: time.Now()}, nil
	})
	require.NoError(t, err)
}

func names(p job.ListPage) []string {
	out := []string{}
	for _, r := range p.Jobs {
		out = append(out, r.Job.Name)
	}
	return out
}

func TestJobsPageShowsNoDeploymentOfAnOlderIncarnation(t *testing.T) {
	t.Parallel()
	st := testenv.Store(t)
	ctx := t.Context()
	createJob(t, st, "team-a", "reborn-job", "")
	deploy(t, st, "team-a", "reborn-job")
	epoch, ok, err := st.TryAcquireLease(ctx, store.SyncLeaseName, "test", time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	s, err := st.LoadSyncState(ctx, "reborn-job")
	require.NoError(t, err)
	wrote, err := st.RecordAppliedAll(ctx, job.Fence{Epoch: epoch}, []job.ActualDeployment{{
		JobName: "reborn-job", JobUID: s.Job.UID, Generation: s.Job.Generation, Team: "team-a", DeploymentVersionSHA: "h",
		JobVersion: "v1", PythonVersion: "3.9", Enabled: true, DeployedBy: "me", DeployedDate: time.Now(),
	}})
	require.NoError(t, err)
	require.Equal(t, []bool{true}, wrote)

	// The job goes, its CronJob not yet (the actual row stays), and a new one takes the name.
	require.NoError(t, st.DeleteJob(ctx, "team-a", "reborn-job"))
	createJob(t, st, "team-b", "reborn-job", "")

	q := job.ListRequest{Limit: 10, Count: true, WithDeployments: true, Filter: job.ListFilter{Visible: job.AllTeams}}
	page, err := st.ListJobs(ctx, q, nil)
	require.NoError(t, err)
	require.Len(t, page.Jobs, 1)
	require.Equal(t, "team-b", page.Jobs[0].Job.Team)
	require.Nil(t, page.Jobs[0].Desired)
	require.Nil(t, page.Jobs[0].Actual, "the CronJob being deleted is the old job's")

	q.Filter.Deployment = job.NotDeployed
	page, err = st.ListJobs(ctx, q, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"reborn-job"}, names(page))
	require.Equal(t, 1, page.Total)
}

func TestJobsPageMatchesSpecialCharactersLiterally(t *testing.T) {
	t.Parallel()
	st := testenv.Store(t)
	createJob(t, st, "team-a", "backslash", `a\b`)
	createJob(t, st, "team-a", "percent", `50%`)
	createJob(t, st, "team-a", "underscore", `a_b`)
	createJob(t, st, "team-a", "plain-job", `axb`)
	for _, tt := range []struct {
		contains string
		want     []string
	}{
		{`\`, []string{"backslash"}},
		{`a\b`, []string{"backslash"}},
		{`%`, []string{"percent"}},
		{`_`, []string{"underscore"}},
		{`a_b`, []string{"underscore"}},
	} {
		page, err := st.ListJobs(t.Context(), job.ListRequest{Limit: 10, Filter: job.ListFilter{Visible: job.AllTeams, DescriptionContains: tt.contains}}, nil)
		require.NoError(t, err)
		require.Equal(t, tt.want, names(page), "contains %q", tt.contains)
	}
}

func TestJobsPageRefusesQueriesItCannotAnswer(t *testing.T) {
	t.Parallel()
	st := testenv.Store(t)
	_, err := st.ListJobs(t.Context(), job.ListRequest{Limit: 0}, nil)
	require.Error(t, err)
	_, err = st.ListJobs(t.Context(), job.ListRequest{Limit: 1, Sort: []job.SortKey{{Field: job.FieldNextRun}}}, nil)
	require.ErrorContains(t, err, "next runs of the schedules are required")
}

func TestJobsAndExecutionsPagesShowOnlyTheVisibleTeams(t *testing.T) {
	t.Parallel()
	st := testenv.Store(t)
	ctx := t.Context()
	createJob(t, st, "team-a", "job-of-a", "")
	createJob(t, st, "team-b", "job-of-b", "")
	createJob(t, st, "team-c", "job-of-c", "")

	tests := []struct {
		name    string
		visible job.Visibility
		filter  job.ListFilter
		want    []string
	}{
		{"a caller of team-a sees team-a only", job.Visibility{Teams: []string{"team-a"}}, job.ListFilter{}, []string{"job-of-a"}},
		{"a team filter cannot widen what is visible", job.Visibility{Teams: []string{"team-a"}}, job.ListFilter{TeamGlob: "team-b"}, []string{}},
		{"a glob cannot widen what is visible", job.Visibility{Teams: []string{"team-a", "team-c"}}, job.ListFilter{TeamGlob: "*"}, []string{"job-of-a", "job-of-c"}},
		{"the zero visibility sees nothing", job.Visibility{}, job.ListFilter{}, []string{}},
		{"all teams see all", job.AllTeams, job.ListFilter{}, []string{"job-of-a", "job-of-b", "job-of-c"}},
	}
	for _, tt := range tests {
		f := tt.filter
		f.Visible = tt.visible
		page, err := st.ListJobs(ctx, job.ListRequest{Limit: 10, Count: true, Filter: f, Sort: []job.SortKey{{Field: job.FieldName}}}, nil)
		require.NoError(t, err, tt.name)
		require.Equal(t, tt.want, names(page), tt.name)
		require.Equal(t, len(tt.want), page.Total, tt.name)

		ex, err := st.Executions(ctx, job.ExecutionsQuery{Limit: 10, Count: true, Filter: job.ExecutionFilter{Visible: tt.visible, TeamNameIn: []string{"team-b"}}})
		require.NoError(t, err, tt.name)
		require.Empty(t, ex.Rows, tt.name) // no executions yet: the statement must still run
	}
}
