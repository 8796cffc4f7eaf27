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
