package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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

func names(p store.JobsPage) []string {
	out := []string{}
	for _, r := range p.Rows {
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
	wrote, err := st.RecordApplied(ctx, store.Fence{Epoch: epoch}, job.ActualDeployment{
		JobName: "reborn-job", JobUID: s.Job.UID, Generation: s.Job.Generation, Team: "team-a", DeploymentVersionSHA: "h",
		JobVersion: "v1", PythonVersion: "3.9", Enabled: true, DeployedBy: "me", DeployedDate: time.Now(),
	})
	require.NoError(t, err)
	require.True(t, wrote)

	// The job goes, its CronJob not yet (the actual row stays), and a new one takes the name.
	require.NoError(t, st.DeleteJob(ctx, "team-a", "reborn-job"))
	createJob(t, st, "team-b", "reborn-job", "")

	q := store.JobsQuery{Limit: 10, Count: true, Columns: store.JobColumns{Config: true, Deployment: true}, Filter: store.JobFilter{Visible: store.AllTeams}}
	page, err := st.JobsPage(ctx, q)
	require.NoError(t, err)
	require.Len(t, page.Rows, 1)
	require.Equal(t, "team-b", page.Rows[0].Job.Team)
	require.Nil(t, page.Rows[0].Desired)
	require.Nil(t, page.Rows[0].Actual, "the CronJob being deleted is the old job's")

	q.Filter.Deployment = store.NotDeployed
	page, err = st.JobsPage(ctx, q)
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
		page, err := st.JobsPage(t.Context(), store.JobsQuery{Limit: 10, Filter: store.JobFilter{Visible: store.AllTeams, DescriptionContains: tt.contains}})
		require.NoError(t, err)
		require.Equal(t, tt.want, names(page), "contains %q", tt.contains)
	}
}

func TestJobsPageRefusesQueriesItCannotAnswer(t *testing.T) {
	t.Parallel()
	st := testenv.Store(t)
	_, err := st.JobsPage(t.Context(), store.JobsQuery{Limit: 0})
	require.Error(t, err)
	_, err = st.JobsPage(t.Context(), store.JobsQuery{Limit: 1, Sort: []store.JobSort{{Field: store.FieldNextRun}}})
	require.ErrorContains(t, err, "NextRun is required")
}

func TestExecutionsGoWithTheirJob(t *testing.T) {
	t.Parallel()
	u := testenv.DatabaseURL(t)
	st, err := store.Open(t.Context(), store.Config{URL: u})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	ctx := t.Context()
	createJob(t, st, "team-a", "runner-job", "")
	conn, err := pgx.Connect(ctx, u)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, `INSERT INTO data_job_execution (id, job_name, type, status, op_id, start_time)
		VALUES ('runner-job-1', 'runner-job', 'manual', 'running', 'op', now())`)
	require.NoError(t, err)

	execs, err := st.ListJobExecutions(ctx, "team-a", "runner-job", nil)
	require.NoError(t, err)
	require.Len(t, execs, 1)
	_, err = st.ListJobExecutions(ctx, "team-b", "runner-job", nil)
	require.Equal(t, job.KindNotFound, job.KindOf(err))

	require.NoError(t, st.DeleteJob(ctx, "team-a", "runner-job"))
	var n int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM data_job_execution`).Scan(&n))
	require.Zero(t, n)
	_, err = st.ListJobExecutions(ctx, "team-a", "runner-job", nil)
	require.Equal(t, job.KindNotFound, job.KindOf(err))
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
		visible store.Visibility
		filter  store.JobFilter
		want    []string
	}{
		{"a caller of team-a sees team-a only", store.Visibility{Teams: []string{"team-a"}}, store.JobFilter{}, []string{"job-of-a"}},
		{"a team filter cannot widen what is visible", store.Visibility{Teams: []string{"team-a"}}, store.JobFilter{TeamGlob: "team-b"}, []string{}},
		{"a glob cannot widen what is visible", store.Visibility{Teams: []string{"team-a", "team-c"}}, store.JobFilter{TeamGlob: "*"}, []string{"job-of-a", "job-of-c"}},
		{"the zero visibility sees nothing", store.Visibility{}, store.JobFilter{}, []string{}},
		{"all teams see all", store.AllTeams, store.JobFilter{}, []string{"job-of-a", "job-of-b", "job-of-c"}},
	}
	for _, tt := range tests {
		f := tt.filter
		f.Visible = tt.visible
		page, err := st.JobsPage(ctx, store.JobsQuery{Limit: 10, Count: true, Filter: f, Sort: []store.JobSort{{Field: store.FieldName}}})
		require.NoError(t, err, tt.name)
		require.Equal(t, tt.want, names(page), tt.name)
		require.Equal(t, len(tt.want), page.Total, tt.name)

		ex, err := st.Executions(ctx, store.ExecutionsQuery{Limit: 10, Count: true, Filter: store.ExecutionFilter{Visible: tt.visible, TeamNameIn: []string{"team-b"}}})
		require.NoError(t, err, tt.name)
		require.Empty(t, ex.Rows, tt.name) // no executions yet: the statement must still run
	}
}
