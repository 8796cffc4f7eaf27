package ui_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/testenv"
)

// The job page shows the deployment's history with each change's diff and a rollback
// button, and the button deploys that revision again (guards: a history a user cannot
// read or act on).
func TestJobPageShowsRevisionsWithDiffAndRollsBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	v2, cron := "v2-of-b", "30 2 * * *"
	_, err := e.svc.PatchDeployment(t.Context(), "team-b", "job-of-b", job.DeploymentChange{JobVersion: &v2, Schedule: &cron}, "bob")
	require.NoError(t, err)
	b := e.browser(t)
	page := b.get("/ui/teams/team-b/jobs/job-of-b")
	require.Equal(t, http.StatusOK, page.status, page.body)
	for _, want := range []string{
		"<strong>Revision 3</strong>", "<strong>Revision 2</strong>", "<strong>Revision 1</strong>",
		"<code>deployment.job_version</code>", "<code>&#34;v1-of-b&#34;</code>", "<code>&#34;v2-of-b&#34;</code>",
		"<code>deployment.schedule</code>", `action="/ui/teams/team-b/jobs/job-of-b/revisions/2/rollback"`,
	} {
		assert.Contains(t, page.body, want)
	}
	assert.NotContains(t, page.body, "/revisions/3/rollback", "no rollback to the current revision")
	assert.NotContains(t, page.body, "/revisions/1/rollback", "revision 1 has no deployment")

	token := testenv.CSRFToken(t, page.body)
	r := b.do(http.MethodPost, "/ui/teams/team-b/jobs/job-of-b/revisions/2/rollback", url.Values{"csrf": {token}}, "HX-Request", "true")
	require.Equal(t, http.StatusOK, r.status, r.body)
	assert.Contains(t, r.body, "Rolled job-of-b back to revision 2")
	dep, err := e.svc.GetDeployment(t.Context(), "team-b", "job-of-b")
	require.NoError(t, err)
	assert.Equal(t, "v1-of-b", dep.Deployment.JobVersion)
	page = b.get("/ui/teams/team-b/jobs/job-of-b")
	assert.Contains(t, page.body, `<span class="pill r-rollback">rollback of 2</span>`)
	assert.Contains(t, page.body, `by <span class="actor">console</span>`)
}

// An execution's page shows its arguments, exit code and termination reason, and
// durations to the millisecond; the job page draws the latest runs as an inline SVG.
func TestExecutionPageShowsArgumentsExitCodeAndReason(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	ex, err := e.svc.ListExecutions(t.Context(), "team-b", "job-of-b", nil)
	require.NoError(t, err)
	require.Len(t, ex, 1)
	id := ex[0].ID
	// As the leader records a finished run (the synchronizer tests prove it does).
	conn, err := pgx.Connect(t.Context(), e.dbURL)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(t.Context()))
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	_, err = conn.Exec(t.Context(), `UPDATE data_job_execution SET status = 'user_error', args = '{"day":"2026-11-30"}',
		exit_code = 3, termination_reason = 'Error', start_time = $2, end_time = $3 WHERE id = $1`,
		id, start, start.Add(125250*time.Millisecond))
	require.NoError(t, err)

	b := e.browser(t)
	r := b.get("/ui/teams/team-b/jobs/job-of-b/executions/" + id)
	require.Equal(t, http.StatusOK, r.status, r.body)
	for _, want := range []string{"<dt>Exit code</dt><dd><code>3</code>", "<dt>Termination reason</dt><dd>Error", "&#34;day&#34;: &#34;2026-11-30&#34;", "2 min 5 s"} {
		assert.Contains(t, r.body, want)
	}
	r = b.get("/ui/teams/team-b/jobs/job-of-b")
	require.Equal(t, http.StatusOK, r.status)
	i := strings.Index(r.body, `<svg class="chart"`)
	require.GreaterOrEqual(t, i, 0, "the run chart")
	svg := r.body[i : i+strings.Index(r.body[i:], "</svg>")]
	assert.Contains(t, svg, `class="bar e-user_error"`)
	assert.Contains(t, svg, id+": user error, 2 min 5 s")
	svg = strings.Replace(svg, `xmlns="http://www.w3.org/2000/svg"`, "", 1)
	assert.NotContains(t, svg, "http", "no external resource")
	assert.NotContains(t, svg, "href")
}
