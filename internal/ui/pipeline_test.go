package ui_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/testenv"
)

// diamond is team-b's pipeline of the tests: extract, then cleanse and enrich, then report.
const diamond = `{"description":"the nightly sales","schedule":{"schedule_cron":"0 2 * * *","time_zone":"Europe/Sofia"},"nodes":[
	{"name":"extract","job_name":"job-of-b"},
	{"name":"cleanse","job_name":"pl-clean","depends_on":["extract"]},
	{"name":"enrich","job_name":"pl-enrich","depends_on":["extract"],"trigger_rule":"all_done"},
	{"name":"report","job_name":"pl-report","depends_on":["cleanse","enrich"]}]}`

func (e *env) pipeline(t *testing.T) {
	t.Helper()
	for _, name := range []string{"pl-clean", "pl-enrich", "pl-report"} {
		_, err := e.svc.CreateJob(t.Context(), "team-b", job.Job{Name: name})
		require.NoError(t, err)
	}
	_, _, err := e.svc.PutPipeline(t.Context(), "team-b", "nightly", []byte(diamond), "bob", "op")
	require.NoError(t, err)
}

func TestThePipelinePagesDrawTheGraphAndTheRunAndItsActionsGoThroughTheService(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.pipeline(t)
	b := e.browser(t)

	list := b.get("/ui/teams/team-b/pipelines")
	require.Equal(t, http.StatusOK, list.status, list.body)
	assert.Contains(t, list.body, `href="/ui/teams/team-b/pipelines/nightly"`)
	assert.Contains(t, list.body, "never ran")

	p := b.get("/ui/teams/team-b/pipelines/nightly")
	require.Equal(t, http.StatusOK, p.status, p.body)
	assert.Contains(t, p.body, `<svg class="dag"`)
	assert.Equal(t, 4, strings.Count(p.body, `class="node st-none"`), "no run yet: every node neutral")
	assert.Equal(t, 4, strings.Count(p.body, `<path class="edge"`))
	assert.Contains(t, p.body, "Europe/Sofia")
	token := testenv.CSRFToken(t, p.body)

	// Run now: without the form's token nothing starts; with it, the run's page.
	r := b.do(http.MethodPost, "/ui/teams/team-b/pipelines/nightly/run", url.Values{})
	require.Equal(t, http.StatusForbidden, r.status, r.body)
	r = b.do(http.MethodPost, "/ui/teams/team-b/pipelines/nightly/run", url.Values{"csrf": {token}})
	require.Equal(t, http.StatusSeeOther, r.status, r.body)
	runs := must(e.svc.ListPipelineRuns(t.Context(), "team-b", "nightly", 1, 10))
	require.Len(t, runs.Items, 1)
	assert.Equal(t, "console", runs.Items[0].StartedBy, "the signed-in user (auth mode none: console)")
	runURL := "/ui/teams/team-b/pipelines/nightly/runs/1"
	require.Equal(t, runURL, r.header.Get("Location"))

	run := b.get(runURL)
	require.Equal(t, http.StatusOK, run.status, run.body)
	assert.Equal(t, 4, strings.Count(run.body, `class="node st-pending"`))
	assert.Contains(t, run.body, "No node has started yet.")
	assert.Contains(t, run.body, "Cancel run")
	assert.NotContains(t, run.body, ">Repair<")
	assert.Contains(t, run.body, `hx-trigger="every 3s`, "a running run's page follows it")

	// extract failed (as the stepper records it), its downstream upstream_failed, the run failed.
	e.sql(t, `UPDATE pipeline_node_run SET status = 'user_error', start_time = now() - interval '2 minutes', end_time = now() - interval '1 minute', message = 'exit 1' WHERE run_id = 1 AND node = 'extract'`)
	e.sql(t, `UPDATE pipeline_node_run SET status = 'upstream_failed', message = 'extract failed' WHERE run_id = 1 AND node <> 'extract'`)
	e.sql(t, `UPDATE pipeline_run SET status = 'failed', end_time = now() WHERE id = 1`)
	run = b.get(runURL)
	assert.Contains(t, run.body, `class="node st-user_error"`)
	assert.Equal(t, 3, strings.Count(run.body, `class="node st-upstream_failed"`))
	assert.Contains(t, run.body, `class="bar st-user_error"`, "the Gantt has extract's bar")
	assert.Contains(t, run.body, ">Repair<")
	assert.NotContains(t, run.body, "Cancel run")
	assert.NotContains(t, run.body, `hx-trigger="every 3s`)
	p = b.get("/ui/teams/team-b/pipelines/nightly")
	assert.Contains(t, p.body, `class="node st-user_error"`, "the pipeline's graph shows its latest run")
	assert.Contains(t, p.body, `href="`+runURL+`"`)

	// Cancel of a failed run: the service's 409, shown as it is. Repair: the failed node
	// and its downstream start again.
	r = b.do(http.MethodPost, runURL+"/cancel", nil, "HX-Request", "true", "X-CSRF-Token", token)
	assert.Equal(t, http.StatusConflict, r.status, r.body)
	assert.Contains(t, r.body, "cannot be cancelled")
	r = b.do(http.MethodPost, runURL+"/repair", nil, "HX-Request", "true", "X-CSRF-Token", token)
	require.Equal(t, http.StatusOK, r.status, r.body)
	assert.Contains(t, r.body, "Repairing run 1: ")
	assert.Equal(t, "dj-refresh", r.header.Get("HX-Trigger"))
	got := must(e.svc.GetPipelineRun(t.Context(), "team-b", "nightly", 1))
	assert.Equal(t, "running", string(got.Status))
	r = b.do(http.MethodPost, runURL+"/cancel", url.Values{"csrf": {token}})
	require.Equal(t, http.StatusSeeOther, r.status, r.body)
	assert.NotNil(t, must(e.svc.GetPipelineRun(t.Context(), "team-b", "nightly", 1)))

	// A run or pipeline that is not there.
	assert.Equal(t, http.StatusNotFound, b.get("/ui/teams/team-b/pipelines/nightly/runs/99").status)
	assert.Equal(t, http.StatusNotFound, b.get("/ui/teams/team-b/pipelines/nope").status)
	assert.Equal(t, http.StatusBadRequest, b.get("/ui/teams/team-b/pipelines/nightly/runs/x").status)
}
