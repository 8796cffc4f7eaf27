package ui_test

import (
	"net/http"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 22: the execution page's "Load all" view polled the whole log every second, so
// each open tab read a full log from the cluster once a second. The panel now polls only
// the tail of a running execution's log; the whole log is read once, when asked for.
func TestTheConsolePollsOnlyTheTailOfARunningLog(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	execs, err := e.svc.ListExecutions(t.Context(), "team-b", "job-of-b", nil)
	require.NoError(t, err)
	require.Len(t, execs, 1)
	page := "/ui/teams/team-b/jobs/job-of-b/executions/" + execs[0].ID
	b := e.browser(t)
	poll := regexp.MustCompile(`id="logs"[^>]*hx-get="([^"]*)"`)

	r := b.get(page)
	require.Equal(t, http.StatusOK, r.status, r.body)
	m := poll.FindStringSubmatch(r.body)
	require.NotNil(t, m, "a running execution's log is polled")
	assert.Equal(t, page+"/logs", m[1], "the poll asks for the tail, not ?all=1")
	assert.Contains(t, r.body, "last 200 lines")

	r = b.get(page + "?all=1")
	require.Equal(t, http.StatusOK, r.status, r.body)
	assert.Nil(t, poll.FindStringSubmatch(r.body), "the whole log is not polled")
	assert.Contains(t, r.body, "reload for more")
}

// Issue 22: the console read logs outside the REST API's log-read slots, so a console tab
// was a way around their bound. Its reads take the same slots: with the caller's share
// held (here by a REST read of the same user in flight), the panel says so instead of
// reading, and reads again once the slot is free.
func TestConsoleLogReadsShareTheAPIsSlots(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	execs, err := e.svc.ListExecutions(t.Context(), "team-b", "job-of-b", nil)
	require.NoError(t, err)
	part := "/ui/teams/team-b/jobs/job-of-b/executions/" + execs[0].ID + "/logs"
	b := e.browser(t)
	release, err := e.logReads.Acquire(t.Context(), "user:console") // who the console is in auth mode none
	require.NoError(t, err)
	r := b.get(part)
	require.Equal(t, http.StatusOK, r.status, r.body)
	assert.Contains(t, r.body, "Too many execution log reads")
	release()
	r = b.get(part)
	require.Equal(t, http.StatusOK, r.status, r.body)
	assert.NotContains(t, r.body, "Too many execution log reads")
}
