package ui_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/testenv"
)

// A finished execution's page has a Re-run button that starts it again with its arguments;
// one under way has none (guards: a re-run a user cannot reach, or one that drops the
// arguments).
func TestRerunButtonOfAFinishedExecutionStartsItAgainWithItsArguments(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	ex, err := e.svc.ListExecutions(t.Context(), "team-b", "job-of-b", nil)
	require.NoError(t, err)
	id := ex[0].ID
	b := e.browser(t)
	page := b.get("/ui/teams/team-b/jobs/job-of-b/executions/" + id)
	require.Equal(t, http.StatusOK, page.status, page.body)
	assert.NotContains(t, page.body, "/rerun", "no re-run of a run under way")

	conn, err := pgx.Connect(t.Context(), e.dbURL)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(t.Context()))
	_, err = conn.Exec(t.Context(), `UPDATE data_job_execution SET status = 'user_error', end_time = now(), args = '{"day":"2026-11-30"}' WHERE id = $1`, id)
	require.NoError(t, err)
	page = b.get("/ui/teams/team-b/jobs/job-of-b/executions/" + id)
	rerun := "/ui/teams/team-b/jobs/job-of-b/executions/" + id + "/rerun"
	require.Contains(t, page.body, `action="`+rerun+`"`)

	r := b.do(http.MethodPost, rerun, url.Values{"csrf": {testenv.CSRFToken(t, page.body)}}, "HX-Request", "true")
	require.Equal(t, http.StatusOK, r.status, r.body)
	assert.Contains(t, r.body, "a re-run of "+id)
	ex, err = e.svc.ListExecutions(t.Context(), "team-b", "job-of-b", nil)
	require.NoError(t, err)
	require.Len(t, ex, 2)
	assert.Equal(t, id, ex[0].RerunOf)
	assert.JSONEq(t, `{"day":"2026-11-30"}`, string(ex[0].Args))
	page = b.get("/ui/teams/team-b/jobs/job-of-b/executions/" + ex[0].ID)
	assert.Contains(t, page.body, `<dt>Re-run of</dt><dd><a href="/ui/teams/team-b/jobs/job-of-b/executions/`+id+`">`)

	r = b.do(http.MethodPost, rerun, url.Values{}, "HX-Request", "true")
	assert.Equal(t, http.StatusForbidden, r.status, "without the CSRF token: %s", r.body)
}

// The job page's backfill form starts a backfill (a datetime-local range read as UTC), the
// panel lists it with its progress and a cancel button, and the button cancels it; a bad
// range is the service's clear error.
func TestBackfillFormStartsListsAndCancelsABackfill(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	b := e.browser(t)
	page := b.get("/ui/teams/team-b/jobs/job-of-b")
	require.Equal(t, http.StatusOK, page.status, page.body)
	require.Contains(t, page.body, `action="/ui/teams/team-b/jobs/job-of-b/backfills"`)
	token := testenv.CSRFToken(t, page.body)

	r := b.do(http.MethodPost, "/ui/teams/team-b/jobs/job-of-b/backfills",
		url.Values{"csrf": {token}, "from": {"2026-01-01T00:00"}, "to": {"2026-01-01T00:59"}, "max_parallel": {"3"}}, "HX-Request", "true")
	require.Equal(t, http.StatusOK, r.status, r.body)
	assert.Contains(t, r.body, "4 runs, at most 3 at once", "*/15 fires 4 times in the hour")

	page = b.get("/ui/teams/team-b/jobs/job-of-b")
	bs, err := e.svc.Backfills(t.Context(), "team-b", "job-of-b")
	require.NoError(t, err)
	require.Len(t, bs, 1)
	cancel := "/ui/teams/team-b/jobs/job-of-b/backfills/" + strconv.FormatInt(bs[0].ID, 10) + "/cancel"
	for _, want := range []string{"2026-01-01T00:00:00Z to 2026-01-01T00:59:00Z, 3 at once", "4 pending", `action="` + cancel + `"`} {
		assert.Contains(t, page.body, want)
	}

	r = b.do(http.MethodPost, cancel, url.Values{"csrf": {token}}, "HX-Request", "true")
	require.Equal(t, http.StatusOK, r.status, r.body)
	page = b.get("/ui/teams/team-b/jobs/job-of-b")
	assert.Contains(t, page.body, "4 cancelled of 4")
	assert.NotContains(t, page.body, `action="`+cancel+`"`, "no cancel button once cancelled")

	r = b.do(http.MethodPost, "/ui/teams/team-b/jobs/job-of-b/backfills",
		url.Values{"csrf": {token}, "from": {"2026-01-02T00:00"}, "to": {"2026-01-01T00:00"}}, "HX-Request", "true")
	assert.Equal(t, http.StatusBadRequest, r.status)
	assert.Contains(t, r.body, "at or after from")
}

// The backfill form is near the top of the job page, behind its button, and a
// backfill's runs are listed as such with their logical time (issue 48, item 7): before,
// the form was at the page's bottom and its runs read "manual" with no logical time.
func TestBackfillRunsShowTheirBackfillAndLogicalTime(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	bf, err := e.svc.CreateBackfill(t.Context(), "team-b", "job-of-b",
		service.BackfillRequest{From: "2026-01-01T00:00:00Z", To: "2026-01-01T00:00:00Z"}, "alice")
	require.NoError(t, err)
	ex, err := e.svc.ListExecutions(t.Context(), "team-b", "job-of-b", nil)
	require.NoError(t, err)
	conn, err := pgx.Connect(t.Context(), e.dbURL)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(t.Context()))
	_, err = conn.Exec(t.Context(), `UPDATE data_job_execution SET backfill_id = $2, logical_time = '2026-01-01T00:00:00Z' WHERE id = $1`, ex[0].ID, bf.ID)
	require.NoError(t, err)

	b := e.browser(t)
	page := b.get("/ui/teams/team-b/jobs/job-of-b")
	require.Equal(t, http.StatusOK, page.status, page.body)
	form, list := strings.Index(page.body, `id="backfill-new"`), strings.Index(page.body, `id="executions"`)
	require.Positive(t, form)
	assert.Less(t, form, list, "the form is above the executions, in the page's head")
	badge := `<span class="pill k-backfill" title="type manual">backfill ` + strconv.FormatInt(bf.ID, 10) + `</span>`
	assert.Contains(t, page.body, badge)
	assert.Contains(t, page.body, `<td data-label="Logical time"><code class="small">2026-01-01T00:00:00Z</code>`)
	page = b.get("/ui/teams/team-b/jobs/job-of-b/executions/" + ex[0].ID)
	assert.Contains(t, page.body, badge)
	assert.Contains(t, page.body, "<code>2026-01-01T00:00:00Z</code>")
}
