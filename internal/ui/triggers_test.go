package ui_test

import (
	"bytes"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/trigger"
)

// The job and pipeline pages list the triggers that start them, each with its last events
// and what they came to.
func TestTheJobAndPipelinePagesListTheirTriggersWithTheirLastEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.pipeline(t)
	ctx := t.Context()
	hook, err := e.svc.CreateTrigger(ctx, "team-b", []byte(`{"name":"orders-hook","target":{"job_name":"job-of-b"},"on":{"kind":"webhook"}}`), "bob")
	require.NoError(t, err)
	_, err = e.svc.CreateTrigger(ctx, "team-b", []byte(`{"name":"after-report","target":{"pipeline_name":"nightly"},
		"on":{"kind":"outcome","job_name":"pl-report","statuses":["succeeded"]},"coalesce":{"mode":"window","seconds":30}}`), "bob")
	require.NoError(t, err)
	body := []byte(`{"order":1}`)
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	_, err = e.svc.InvokeTrigger(ctx, service.Invocation{TriggerID: hook.ID, Timestamp: ts, Signature: trigger.Sign(hook.Secret, ts, body), Body: bytes.NewReader(body)})
	require.NoError(t, err)
	b := e.browser(t)

	j := b.get("/ui/teams/team-b/jobs/job-of-b")
	require.Equal(t, http.StatusOK, j.status, j.body)
	assert.Contains(t, j.body, `id="triggers"`)
	assert.Contains(t, j.body, "orders-hook")
	assert.Contains(t, j.body, "a signed call")
	assert.Contains(t, j.body, "pending")
	assert.NotContains(t, j.body, "after-report", "a pipeline's trigger is on its page")

	p := b.get("/ui/teams/team-b/pipelines/nightly")
	require.Equal(t, http.StatusOK, p.status, p.body)
	assert.Contains(t, p.body, "after-report")
	assert.Contains(t, p.body, "job pl-report of team team-b ends succeeded")
	assert.Contains(t, p.body, "window of 30s")
	assert.Contains(t, p.body, "No events in the last 30 days.")
}

// Issue 42: a run a trigger started said only "trigger/team-b/orders-hook/17" on its page,
// and the panel's events named their runs without a link: neither way led to the other.
// The event's row links to its run's page, and the run's "Started by" to the event's row
// in the job page's trigger panel.
func TestATriggeredRunAndItsEventLinkToEachOther(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	ctx := t.Context()
	hook, err := e.svc.CreateTrigger(ctx, "team-b", []byte(`{"name":"orders-hook","target":{"job_name":"job-of-b"},"on":{"kind":"webhook"}}`), "bob")
	require.NoError(t, err)
	body := []byte(`{"order":1}`)
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	_, err = e.svc.InvokeTrigger(ctx, service.Invocation{TriggerID: hook.ID, Timestamp: ts, Signature: trigger.Sign(hook.Secret, ts, body), Body: bytes.NewReader(body)})
	require.NoError(t, err)
	// What the firer records when it starts the event's run (its own tests cover that it does).
	tr, err := e.svc.GetTrigger(ctx, "team-b", "orders-hook")
	require.NoError(t, err)
	require.Len(t, tr.LastEvents, 1)
	event := tr.LastEvents[0].ID
	e.sql(t, `INSERT INTO data_job_execution (id, job_name, type, status, op_id, start_time, started_by)
		VALUES ('job-of-b-hooked', 'job-of-b', 'manual', 'running', 'trigger-1', now(), $1)`, trigger.StartedBy("team-b", "orders-hook", event))
	e.sql(t, `UPDATE job_trigger_event SET status = 'started', run = 'job-of-b-hooked', decided_at = now() WHERE id = $1`, event)
	b := e.browser(t)

	const jobPage = "/ui/teams/team-b/jobs/job-of-b"
	j := b.get(jobPage)
	require.Equal(t, http.StatusOK, j.status, j.body)
	row := `id="trigger-event-` + strconv.FormatInt(event, 10) + `"`
	assert.Contains(t, j.body, row)
	assert.Contains(t, j.body, `<a href="`+jobPage+`/executions/job-of-b-hooked"><code>job-of-b-hooked</code></a>`)

	x := b.get(jobPage + "/executions/job-of-b-hooked")
	require.Equal(t, http.StatusOK, x.status, x.body)
	assert.Contains(t, x.body, `<dt>Started by</dt><dd><a href="`+jobPage+`#trigger-event-`+strconv.FormatInt(event, 10)+`">trigger/team-b/orders-hook/`)

	ex, err := e.svc.ListExecutions(ctx, "team-b", "job-of-b", nil)
	require.NoError(t, err)
	for _, other := range ex {
		if other.ID != "job-of-b-hooked" {
			x = b.get(jobPage + "/executions/" + other.ID)
			assert.Contains(t, x.body, `<dt>Started by</dt><dd>`+other.StartedBy+`</dd>`, "a run no trigger started names who did, unlinked")
		}
	}
}
