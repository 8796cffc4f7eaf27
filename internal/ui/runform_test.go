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

	"github.com/datajobs/datajobs/internal/testenv"
)

// endRun records job-of-b's run as finished with status and log, as the leader would, and
// returns its id.
func endRun(t *testing.T, e *env, status, log string) string {
	t.Helper()
	ex, err := e.svc.ListExecutions(t.Context(), "team-b", "job-of-b", nil)
	require.NoError(t, err)
	id := ex[0].ID
	conn, err := pgx.Connect(t.Context(), e.dbURL)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(t.Context()))
	_, err = conn.Exec(t.Context(), `UPDATE data_job_execution SET status = $2, end_time = now() WHERE id = $1`, id, status)
	require.NoError(t, err)
	_, err = conn.Exec(t.Context(), `INSERT INTO data_job_execution_log (execution_id, logs) VALUES ($1, $2)
		ON CONFLICT (execution_id) DO UPDATE SET logs = EXCLUDED.logs, pending = false`, id, log)
	require.NoError(t, err)
	return id
}

// Run now takes arguments (issue 48, item 7): the job page's "Run with arguments" form
// starts a run with the JSON object, and refuses what the REST API refuses, with its
// message (guards: a console that can only start runs without arguments).
func TestRunWithArgumentsStartsARunWithThemAndRefusesWhatTheAPIRefuses(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	endRun(t, e, "succeeded", "ok\n")
	b := e.browser(t)
	page := b.get("/ui/teams/team-b/jobs/job-of-b")
	require.Equal(t, http.StatusOK, page.status, page.body)
	require.Contains(t, page.body, `<textarea id="run-args" name="args"`)
	token := testenv.CSRFToken(t, page.body)
	run := "/ui/teams/team-b/jobs/job-of-b/run"

	for args, want := range map[string]string{
		`[1, 2]`:                   "a JSON object of strings, numbers and booleans",
		`{"day": {"of": "month"}}`: `&#34;day&#34; holding`,
		`{"day": `:                 "not an object",
	} {
		r := b.do(http.MethodPost, run, url.Values{"csrf": {token}, "args": {args}}, "HX-Request", "true")
		assert.Equal(t, http.StatusBadRequest, r.status, args)
		assert.Contains(t, r.body, want, args)
	}
	ex, err := e.svc.ListExecutions(t.Context(), "team-b", "job-of-b", nil)
	require.NoError(t, err)
	require.Len(t, ex, 1, "nothing started by a refused request")

	r := b.do(http.MethodPost, run, url.Values{"csrf": {token}, "args": {` {"day": "2026-11-30", "full": true} `}}, "HX-Request", "true")
	require.Equal(t, http.StatusOK, r.status, r.body)
	assert.Contains(t, r.body, "with arguments")
	ex, err = e.svc.ListExecutions(t.Context(), "team-b", "job-of-b", nil)
	require.NoError(t, err)
	require.Len(t, ex, 2)
	assert.JSONEq(t, `{"day":"2026-11-30","full":true}`, string(ex[0].Args))
}

// A failed run's page shows the line that says why first and marks it in the log, which
// opens at its end (issue 48, item 7; Airflow and Dagster show the error first): before,
// the exception was below the top of a 36rem box.
func TestAFailedRunsPageShowsItsErrorLineFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	var log strings.Builder
	for i := range 150 {
		log.WriteString("INFO step line " + strconv.Itoa(i) + "\n")
	}
	log.WriteString("Traceback (most recent call last):\n  File \"20_load.py\", line 7, in run\nValueError: the input table is empty\nWhat happened: Data Job failed\n")
	id := endRun(t, e, "user_error", log.String())
	b := e.browser(t)
	page := b.get("/ui/teams/team-b/jobs/job-of-b/executions/" + id)
	require.Equal(t, http.StatusOK, page.status, page.body)
	alert := strings.Index(page.body, `class="alert error log-error"`)
	box := strings.Index(page.body, `<pre class="log" data-end`)
	require.Positive(t, alert, "the error line is shown")
	require.Less(t, alert, box, "above the log")
	assert.Contains(t, page.body[alert:box], "ValueError: the input table is empty")
	assert.Contains(t, page.body[box:], `<mark id="log-error">ValueError: the input table is empty</mark>`+"\nWhat happened")
	assert.Contains(t, page.body[box:], "INFO step line 0\n", "the log is whole around it")

	id = endRun(t, e, "succeeded", "no ValueError here, all fine\n")
	page = b.get("/ui/teams/team-b/jobs/job-of-b/executions/" + id)
	assert.NotContains(t, page.body, "log-error", "a run that did not fail has no error line")
}
