package ui_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/datajobs/datajobs/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestJobsListShowsWhatAUserReadsAndSearchesInSQL(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	b := e.browser(t)

	r := b.get("/ui/")
	require.Equal(t, http.StatusOK, r.status, r.body)
	for _, want := range []string{
		"job-of-a", "job-of-b", "team-a", "team-b", // both teams: auth mode none is an admin
		"daily at 06:00 UTC", "every 15 minutes", // schedules in words
		"v1-of-b", `class="pill s-pending"`, "not deployed", // version, deployment status
		`<label for="q">Search by name</label>`,
	} {
		assert.Contains(t, r.body, want)
	}

	r = b.get("/ui/?q=of-b")
	require.Equal(t, http.StatusOK, r.status)
	assert.Contains(t, r.body, "job-of-b")
	assert.NotContains(t, r.body, "job-of-a")
	assert.Contains(t, r.body, "1–1 of 1 jobs")

	r = b.get("/ui/?q=job-*-a")
	assert.Contains(t, r.body, `href="/ui/teams/team-a/jobs/job-of-a"`, "a glob matches the whole name")
	assert.NotContains(t, r.body, "job-of-b")

	// The deployment status, filtered in SQL on what the list shows; links keep the filter.
	r = b.get("/ui/?status=pending")
	require.Equal(t, http.StatusOK, r.status)
	assert.Contains(t, r.body, `<label for="status">Status</label>`)
	assert.Contains(t, r.body, `<option value="pending" selected>pending</option>`)
	assert.Contains(t, r.body, "job-of-b")
	assert.NotContains(t, r.body, "job-of-a")
	assert.Contains(t, r.body, `href="/ui/?sort=team&amp;status=pending"`, "a sort keeps the status filter")
	r = b.get("/ui/?status=synced")
	assert.Contains(t, r.body, "No jobs match.")
	assert.NotContains(t, r.body, "job-of-b", "nothing is synced without a synchronizer")

	r = b.get("/ui/?deployment=not_deployed")
	assert.Contains(t, r.body, "job-of-a")
	assert.NotContains(t, r.body, "job-of-b")

	r = b.get("/ui/?team=team-b&sort=name&dir=desc", "HX-Request", "true")
	require.Equal(t, http.StatusOK, r.status)
	assert.True(t, strings.HasPrefix(r.body, `<div id="jobtable"`), "htmx gets the table alone")
	assert.NotContains(t, r.body, "job-of-a")
}

func TestAPollThatWouldGetTheSameBytesGets304(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	b := e.browser(t)
	path := "/ui/teams/team-b/jobs/job-of-b/deployment"
	first := b.get(path, "HX-Request", "true")
	require.Equal(t, http.StatusOK, first.status, first.body)
	etag := first.header.Get("ETag")
	require.NotEmpty(t, etag)
	again := b.get(path, "HX-Request", "true", "If-None-Match", etag)
	assert.Equal(t, http.StatusNotModified, again.status)
	assert.Empty(t, again.body)

	// A change makes the next poll a 200 with the new state.
	r := b.get("/ui/teams/team-b/jobs/job-of-b")
	res := b.do(http.MethodPost, "/ui/teams/team-b/jobs/job-of-b/disable", nil, "HX-Request", "true", "X-CSRF-Token", testenv.CSRFToken(t, r.body))
	require.Equal(t, http.StatusOK, res.status, res.body)
	changed := b.get(path, "HX-Request", "true", "If-None-Match", etag)
	require.Equal(t, http.StatusOK, changed.status)
	assert.Contains(t, changed.body, ">Enable</button>")
}

func TestJobPageShowsDeploymentPropertiesAndExecutions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	b := e.browser(t)
	r := b.get("/ui/teams/team-b/jobs/job-of-b")
	require.Equal(t, http.StatusOK, r.status, r.body)
	for _, want := range []string{
		"secret plans of b", // description
		"Desired next to actual", "<code>v1-of-b</code>", `class="differs"`, "Nothing applied to the cluster yet.",
		"&#34;secret&#34;: &#34;of-b&#34;", // properties, pretty JSON
		"job-of-b-", "submitted", "manual", // the execution
		">Disable</button>", ">Run now</button>", ">Delete deployment</button>",
	} {
		assert.Contains(t, r.body, want)
	}

	r = b.get("/ui/teams/team-a/jobs/job-of-a")
	require.Equal(t, http.StatusOK, r.status)
	assert.Contains(t, r.body, "This job is not deployed.")
	assert.NotContains(t, r.body, ">Run now</button>")

	r = b.get("/ui/teams/team-a/jobs/no-such-job")
	assert.Equal(t, http.StatusNotFound, r.status)
	assert.Contains(t, r.body, `The data job &#34;no-such-job&#34; was not found for team &#34;team-a&#34;.`, "the API's error, verbatim")
}

func TestActionsGoThroughTheServiceWithCSRF(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	b := e.browser(t)
	page := b.get("/ui/teams/team-b/jobs/job-of-b")
	token := testenv.CSRFToken(t, page.body)
	disable := "/ui/teams/team-b/jobs/job-of-b/disable"

	r := b.do(http.MethodPost, disable, url.Values{}, "HX-Request", "true")
	assert.Equal(t, http.StatusForbidden, r.status, "no CSRF token")
	r = b.do(http.MethodPost, disable, url.Values{"csrf": {"forged"}})
	assert.Equal(t, http.StatusForbidden, r.status, "a wrong CSRF token")
	dep, err := e.svc.GetDeployment(t.Context(), "team-b", "job-of-b")
	require.NoError(t, err)
	require.True(t, dep.Deployment.Enabled, "a refused action changes nothing")

	r = b.do(http.MethodPost, disable, url.Values{"csrf": {token}})
	assert.Equal(t, http.StatusSeeOther, r.status, "a form post goes back to the job")
	dep, err = e.svc.GetDeployment(t.Context(), "team-b", "job-of-b")
	require.NoError(t, err)
	assert.False(t, dep.Deployment.Enabled)
	assert.Equal(t, "console", dep.Deployment.DeployedBy)

	// The API's error, verbatim: another run while one is under way.
	r = b.do(http.MethodPost, "/ui/teams/team-b/jobs/job-of-b/run", nil, "HX-Request", "true", "X-CSRF-Token", token)
	assert.Equal(t, http.StatusConflict, r.status, r.body)
	assert.Contains(t, r.body, `role="alert"`)

	r = b.do(http.MethodPost, "/ui/teams/team-b/jobs/job-of-b/properties", url.Values{"csrf": {token}, "properties": {"[1]"}}, "HX-Request", "true")
	assert.Equal(t, http.StatusBadRequest, r.status)
	assert.Contains(t, r.body, "properties")
	r = b.do(http.MethodPost, "/ui/teams/team-b/jobs/job-of-b/properties", url.Values{"csrf": {token}, "properties": {`{"k": 2}`}}, "HX-Request", "true")
	require.Equal(t, http.StatusOK, r.status, r.body)
	assert.Equal(t, "dj-refresh", r.header.Get("HX-Trigger"))
	props, err := e.svc.GetProperties(t.Context(), "team-b", "job-of-b")
	require.NoError(t, err)
	assert.JSONEq(t, `{"k":2}`, string(props))

	r = b.do(http.MethodPost, "/ui/teams/team-b/jobs/job-of-b/delete-deployment", nil, "HX-Request", "true", "X-CSRF-Token", token)
	require.Equal(t, http.StatusOK, r.status, r.body)
	_, err = e.svc.GetDeployment(t.Context(), "team-b", "job-of-b")
	assert.Error(t, err, "the deployment is gone (no synchronizer: no actual row either)")
}

func TestSignInWithPKCEMakesAServerSideSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	b := e.browser(t)
	first := b.get("/ui/teams/team-a/jobs/job-of-a")
	require.Equal(t, http.StatusSeeOther, first.status)
	assert.Contains(t, first.header.Get("Location"), "/ui/login?return=")

	login := b.get(first.header.Get("Location"))
	require.Equal(t, http.StatusSeeOther, login.status, login.body)
	to := must(url.Parse(login.header.Get("Location")))
	assert.Equal(t, "S256", to.Query().Get("code_challenge_method"))
	assert.NotEmpty(t, to.Query().Get("code_challenge"))
	assert.Equal(t, "datajobs", to.Query().Get("audience"))
	ck := login.header.Get("Set-Cookie")
	assert.Contains(t, ck, "HttpOnly")
	assert.Contains(t, ck, "SameSite=Lax")

	page := e.provider.SignIn(t, b.client, e.url+"/ui/", "alice", "team-a")
	assert.Contains(t, page, "alice")
	assert.Contains(t, page, "job-of-a")
	assert.NotContains(t, page, "job-of-b")

	// A forged session cookie (an id the database does not know) is no session.
	forged := e.browser(t)
	u := must(url.Parse(e.url + "/ui/"))
	forged.client.Jar.SetCookies(u, []*http.Cookie{{Name: "datajobs_console", Value: "eyJ1IjoibWFsbG9yeSIsImEiOnRydWV9"}})
	r := forged.get("/ui/")
	assert.Equal(t, http.StatusSeeOther, r.status)

	// A callback with a state this browser did not start is refused.
	r = e.browser(t).get("/ui/callback?code=x&state=y")
	assert.Equal(t, http.StatusUnauthorized, r.status)
}
