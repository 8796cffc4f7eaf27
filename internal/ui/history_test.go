package ui_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/testenv"
)

// A console action is a write like the REST API's: its revision names the signed-in
// user, and the team's audit log has it with its status, never the form's values
// (guards: changes made in the browser that no history shows).
func TestConsoleActionsAreRevisionsAndInTheAuditLog(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	b := e.browser(t)
	token := testenv.CSRFToken(t, b.get("/ui/teams/team-b/jobs/job-of-b").body)
	r := b.do(http.MethodPost, "/ui/teams/team-b/jobs/job-of-b/disable", url.Values{"csrf": {token}})
	require.Equal(t, http.StatusSeeOther, r.status, r.body)
	r = b.do(http.MethodPost, "/ui/teams/team-b/jobs/job-of-b/properties", url.Values{"csrf": {token}, "properties": {`{"password":"hunter2"}`}}, "HX-Request", "true")
	require.Equal(t, http.StatusOK, r.status, r.body)
	r = b.do(http.MethodPost, "/ui/teams/team-b/jobs/job-of-b/run", nil, "HX-Request", "true", "X-CSRF-Token", token)
	require.Equal(t, http.StatusConflict, r.status, "a run is under way: %s", r.body)

	revs, err := e.svc.Revisions(t.Context(), "team-b", "job-of-b", 0, 10)
	require.NoError(t, err)
	require.Equal(t, "console", revs.Revisions[0].Actor, "the console's user in auth mode none")
	require.Equal(t, "deployment.enabled", revs.Revisions[0].Diff[0].Field)

	log, err := e.svc.Audit(t.Context(), "team-b", 0, 10)
	require.NoError(t, err)
	require.Len(t, log.Entries, 3)
	got := []string{}
	for _, en := range log.Entries {
		assert.Equal(t, "console", en.Actor)
		assert.NotEmpty(t, en.OpID)
		got = append(got, en.Path+" "+http.StatusText(en.Status))
	}
	assert.Equal(t, []string{
		"/ui/teams/team-b/jobs/job-of-b/run Conflict",
		"/ui/teams/team-b/jobs/job-of-b/properties OK",
		"/ui/teams/team-b/jobs/job-of-b/disable See Other",
	}, got)
	other, err := e.svc.Audit(t.Context(), "team-a", 0, 10)
	require.NoError(t, err)
	assert.Empty(t, other.Entries, "team-a made no write")
}
