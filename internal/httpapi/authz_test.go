package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/auth"
	"github.com/datajobs/datajobs/internal/httpapi"
	"github.com/datajobs/datajobs/internal/testenv"
)

// authEnv is the whole API in auth mode oidc against the real provider, with a job of
// team-a and a deployed job of team-b (with sources and properties), and a token per
// team and one of an admin.
type authEnv struct {
	*env
	tokA, tokB, tokAdmin string
}

func bearer(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

func newAuthEnv(t *testing.T, opts ...func(*options)) *authEnv {
	t.Helper()
	p := testenv.OIDC(t)
	verifier, err := auth.NewOIDC(auth.OIDCConfig{
		IssuerURLs: []string{p.IssuerURL}, Audience: testenv.Audience,
		UsernameClaim: "username", AdminTeams: []string{"platform"},
	})
	require.NoError(t, err)
	e := &authEnv{
		env: newEnv(t, append([]func(*options){func(o *options) {
			o.auth, o.graphql = verifier, true
		}}, opts...)...),
		tokA: p.ClientToken(t, "bot-a", "team-a"), tokB: p.ClientToken(t, "bot-b", "team-b"),
		tokAdmin: p.ClientToken(t, "ops", "platform"),
	}
	as := func(tok, method, path, body string, want int, headers ...string) {
		t.Helper()
		r := e.do(method, path, body, append(bearer(tok), headers...)...)
		require.Equal(t, want, r.status, "%s %s: %s", method, path, r.body)
	}
	as(e.tokA, "POST", "/data-jobs/for-team/team-a/jobs", `{"job_name":"job-of-a","description":"d"}`, http.StatusCreated)
	as(e.tokB, "POST", "/data-jobs/for-team/team-b/jobs", `{"job_name":"job-of-b","description":"d","config":{"schedule":{"schedule_cron":"15 10 * * *"}}}`, http.StatusCreated)
	as(e.tokB, "POST", "/data-jobs/for-team/team-b/jobs/job-of-b/deployments", `{"job_version":"v1","enabled":true}`, http.StatusAccepted)
	as(e.tokB, "PUT", "/data-jobs/for-team/team-b/jobs/job-of-b/deployments/release/properties", `{"secret":"of-b"}`, http.StatusNoContent)
	as(e.tokB, "POST", "/data-jobs/for-team/team-b/jobs/job-of-b/sources", sampleJob(t, time.Unix(1e9, 0), 8), http.StatusOK,
		"Content-Type", "application/octet-stream")
	return e
}

// stateOfB is everything a caller of team-b can read about its job.
func (e *authEnv) stateOfB(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, p := range []string{"", "/deployments/release", "/deployments/release/properties", "/sources"} {
		r := e.do("GET", "/data-jobs/for-team/team-b/jobs/job-of-b"+p, "", bearer(e.tokB)...)
		require.Equal(t, http.StatusOK, r.status, "GET %s: %s", p, r.body)
		out = append(out, string(r.body))
	}
	return out
}

// authzCases holds, for every route pattern, a request against team-b's job: the path's
// parameters are filled from here. A route without a case fails the test below.
var authzCases = map[string]struct {
	body, contentType string
	anyCaller         bool // a route that names no team: authentication only
	filtered          bool // the GraphQL query: any caller, only its teams' rows
}{
	"GET /data-jobs/for-team/{team}/info":                                               {},
	"POST /data-jobs/for-team/{team}/jobs":                                              {body: `{"job_name":"new-in-b","description":"d"}`},
	"GET /data-jobs/for-team/{team}/jobs":                                               {filtered: true},
	"GET /data-jobs/for-team/{team}/jobs/{job}":                                         {},
	"PUT /data-jobs/for-team/{team}/jobs/{job}":                                         {body: `{"job_name":"job-of-b","description":"changed"}`},
	"DELETE /data-jobs/for-team/{team}/jobs/{job}":                                      {},
	"PUT /data-jobs/for-team/{team}/jobs/{job}/team/{new_team}":                         {},
	"GET /data-jobs/for-team/{team}/jobs/{job}/deployments":                             {},
	"POST /data-jobs/for-team/{team}/jobs/{job}/deployments":                            {body: `{"job_version":"v2"}`},
	"GET /data-jobs/for-team/{team}/jobs/{job}/deployments/{deployment_id}":             {},
	"PATCH /data-jobs/for-team/{team}/jobs/{job}/deployments/{deployment_id}":           {body: `{"enabled":false}`},
	"DELETE /data-jobs/for-team/{team}/jobs/{job}/deployments/{deployment_id}":          {},
	"GET /data-jobs/for-team/{team}/jobs/{job}/deployments/{deployment_id}/properties":  {},
	"PUT /data-jobs/for-team/{team}/jobs/{job}/deployments/{deployment_id}/properties":  {body: `{"secret":"stolen"}`},
	"GET /data-jobs/for-team/{team}/jobs/{job}/deployments/{deployment_id}/executions":  {},
	"POST /data-jobs/for-team/{team}/jobs/{job}/deployments/{deployment_id}/executions": {body: `{}`},
	"GET /data-jobs/for-team/{team}/jobs/{job}/deployments/{deployment_id}/secrets":     {},
	"PUT /data-jobs/for-team/{team}/jobs/{job}/deployments/{deployment_id}/secrets":     {body: `{"k":"v"}`},
	"GET /data-jobs/for-team/{team}/jobs/{job}/executions":                              {},
	"GET /data-jobs/for-team/{team}/jobs/{job}/executions/{execution_id}":               {},
	"DELETE /data-jobs/for-team/{team}/jobs/{job}/executions/{execution_id}":            {},
	"GET /data-jobs/for-team/{team}/jobs/{job}/executions/{execution_id}/logs":          {},
	"GET /data-jobs/for-team/{team}/jobs/{job}/keytab":                                  {},
	"POST /data-jobs/for-team/{team}/jobs/{job}/sources":                                {body: "PK\x05\x06" + strings.Repeat("\x00", 18), contentType: "application/octet-stream"},
	"GET /data-jobs/for-team/{team}/jobs/{job}/sources":                                 {},
	"DELETE /data-jobs/for-team/{team}/jobs/{job}/sources":                              {},
	"GET /data-jobs/teams/{team}/oauth-credentials":                                     {},
	"PUT /data-jobs/teams/{team}/oauth-credentials":                                     {body: `{"clientId":"x","clientSecret":"y"}`},
	"GET /data-jobs/teams/{team}/oauth-credentials/client-id":                           {},
	"POST /data-jobs/oauth-credentials/client-ids":                                      {body: `["x"]`, anyCaller: true},
}

// fill makes a request path from a route pattern.
func fill(pattern, team, newTeam string) (method, path string) {
	method, path, _ = strings.Cut(pattern, " ")
	r := strings.NewReplacer("{team}", team, "{job}", "job-of-b", "{deployment_id}", "release",
		"{execution_id}", "job-of-b-1700000000", "{new_team}", newTeam)
	return method, r.Replace(path)
}

func TestEveryRouteKeepsTeamsApart(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t)
	before := e.stateOfB(t)

	patterns := httpapi.Patterns(httpapi.Config{JobsQuery: http.NotFoundHandler()})
	require.NotEmpty(t, patterns)
	for _, pattern := range patterns {
		c, ok := authzCases[pattern]
		if !assertCase(t, ok, pattern) {
			continue
		}
		headers := []string{}
		if c.body != "" {
			headers = append(headers, "Content-Type", cmpOr(c.contentType, "application/json"))
		}

		// No token: 401 with the challenge, whatever the route.
		method, path := fill(pattern, "team-b", "team-a")
		r := e.do(method, path, c.body, headers...)
		require.Equal(t, http.StatusUnauthorized, r.status, "%s without a token: %s", pattern, r.body)
		require.Contains(t, r.header.Get("WWW-Authenticate"), "Bearer", pattern)
		r.vdkError(t)

		// team-a's caller on team-b's job (moving it into team-a): 403 naming team-b.
		r = e.do(method, path, c.body, append(bearer(e.tokA), headers...)...)
		if c.filtered {
			require.Equal(t, http.StatusOK, r.status, "%s by team-a: %s", pattern, r.body)
			require.NotContains(t, string(r.body), "job-of-b", "%s: team-b's rows never reach team-a", pattern)
			continue
		}
		if c.anyCaller {
			require.NotEqual(t, http.StatusForbidden, r.status, pattern)
			require.NotEqual(t, http.StatusUnauthorized, r.status, pattern)
			continue
		}
		require.Equal(t, http.StatusForbidden, r.status, "%s by team-a: %s", pattern, r.body)
		require.Contains(t, r.vdkError(t)["what"], "team-b", pattern)

		// team-a's caller naming team-b's job under its own team: never a success.
		method, path = fill(pattern, "team-a", "team-a")
		r = e.do(method, path, c.body, append(bearer(e.tokA), headers...)...)
		if strings.Contains(pattern, "{job}") {
			require.GreaterOrEqual(t, r.status, 400, "%s: team-b's job through team-a's path: %s", pattern, r.body)
		}
	}
	require.Equal(t, before, e.stateOfB(t), "team-b's job is as it was")

	// The admin reaches team-b's job; team-b's own caller too.
	for _, tok := range []string{e.tokAdmin, e.tokB} {
		r := e.do("GET", "/data-jobs/for-team/team-b/jobs/job-of-b", "", bearer(tok)...)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	}
}

// assertCase fails the test for a route without an authorization case.
func assertCase(t *testing.T, ok bool, pattern string) bool {
	t.Helper()
	if !ok {
		t.Errorf("route %q has no case in authzCases: add one, with the request that team-a must not be allowed to make on team-b's job", pattern)
	}
	return ok
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func TestMovingAJobNeedsBothTeams(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t)
	// bot-a is in team-a only: it cannot give its job to team-b.
	r := e.do("PUT", "/data-jobs/for-team/team-a/jobs/job-of-a/team/team-b", "", bearer(e.tokA)...)
	require.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
	require.Contains(t, r.vdkError(t)["what"], "team-b")
	r = e.do("GET", "/data-jobs/for-team/team-a/jobs/job-of-a", "", bearer(e.tokA)...)
	require.Equal(t, http.StatusOK, r.status, "the job stayed in team-a: %s", r.body)

	both := testenv.OIDC(t).ClientToken(t, "bot-ab", "team-a", "team-b")
	r = e.do("PUT", "/data-jobs/for-team/team-a/jobs/job-of-a/team/team-b", "", bearer(both)...)
	require.Equal(t, http.StatusOK, r.status, "a member of both moves it: %s", r.body)
	r = e.do("GET", "/data-jobs/for-team/team-b/jobs/job-of-a", "", bearer(e.tokB)...)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
}

func TestDeployedByIsTheTokensUsername(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t)
	e.deploy("/data-jobs/for-team/team-a/jobs/job-of-a", `{"job_version":"v1","deployed_by":"mallory"}`,
		append(bearer(e.tokA), "X-Datajobs-User", "mallory")...)
	r := e.do("GET", "/data-jobs/for-team/team-a/jobs/job-of-a/deployments/release", "", bearer(e.tokA)...)
	require.Equal(t, http.StatusOK, r.status)
	var d struct {
		DeployedBy string `json:"last_deployed_by"`
	}
	r.json(t, &d)
	require.Equal(t, "bot-a", d.DeployedBy, "neither the header nor the body can set it in auth mode oidc")

	r = e.do("POST", "/data-jobs/for-team/team-a/jobs/job-of-a/sources", sampleJob(t, time.Unix(1e9, 0), 8),
		append(bearer(e.tokA), "Content-Type", "application/octet-stream", "X-Datajobs-User", "mallory")...)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var by string
	require.NoError(t, e.storeConn(t).QueryRow(t.Context(),
		`SELECT uploaded_by FROM data_job_source WHERE job_name = 'job-of-a'`).Scan(&by))
	require.Equal(t, "bot-a", by, "the sources uploader is the token's username too")

	r = e.do("POST", "/data-jobs/for-team/team-a/jobs/job-of-a/deployments/release/executions", `{"started_by":"mallory"}`,
		append(bearer(e.tokA), "X-Datajobs-User", "mallory")...)
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	var ex struct {
		StartedBy string `json:"started_by"`
	}
	r.json(t, &ex)
	require.Equal(t, "mallory/bot-a", ex.StartedBy, "started_by is the client's label, then the token's username")
}

func TestGraphQLShowsOnlyTheCallersTeams(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t)
	both := testenv.OIDC(t).ClientToken(t, "bot-c", "team-a", "team-c")
	query := `{ jobs(pageNumber: 1, pageSize: 50, filter: [{property: "config.team", pattern: "team-b"}]) { content { jobName } totalItems } }`
	all := `{ jobs(pageNumber: 1, pageSize: 50) { content { jobName } totalItems } }`
	tests := []struct {
		name, tok, path, query, want string
	}{
		{"a team-b filter shows team-a nothing of team-b", e.tokA, "team-a", query, `"totalItems":0`},
		{"no filter shows team-a its own jobs only", e.tokA, "team-a", all, `{"jobName":"job-of-a"}],"totalItems":1`},
		{"a member of two teams sees both of them only", both, "team-a", all, `{"jobName":"job-of-a"}],"totalItems":1`},
		{"the admin sees all", e.tokAdmin, "team-a", all, `"totalItems":2`},
	}
	for _, tt := range tests {
		r := e.do("GET", "/data-jobs/for-team/"+tt.path+"/jobs?query="+url.QueryEscape(tt.query), "", bearer(tt.tok)...)
		require.Equal(t, http.StatusOK, r.status, "%s: %s", tt.name, r.body)
		require.Contains(t, string(r.body), tt.want, tt.name)
		if tt.tok != e.tokAdmin {
			require.NotContains(t, string(r.body), "job-of-b", "%s: never another team's job", tt.name)
		}
	}
	// Executions likewise, whatever teamNameIn says.
	e.sql(`INSERT INTO data_job_execution (id, job_name, type, status, op_id, start_time, started_by)
		VALUES ('job-of-b-1', 'job-of-b', 'manual', 'running', 'op', now(), 'bot-b')`)
	q := `{ executions(pageNumber: 1, pageSize: 10, filter: {teamNameIn: ["team-b"]}) { content { id } totalItems } }`
	r := e.do("GET", "/data-jobs/for-team/team-a/jobs?query="+url.QueryEscape(q), "", bearer(e.tokA)...)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Contains(t, string(r.body), `"totalItems":0`)
	r = e.do("GET", "/data-jobs/for-team/team-b/jobs?query="+url.QueryEscape(q), "", bearer(e.tokB)...)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Contains(t, string(r.body), `"job-of-b-1"`)
}

// storeConn opens a connection to the test database, to read what the API does not show.
func (e *authEnv) storeConn(t *testing.T) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), e.dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.WithoutCancel(t.Context())) })
	return conn
}

// webhookFunc is the decision of a test's authorization webhook (the operator's service).
type webhookFunc func(auth.WebhookRequest) int

func TestWebhookAllowsDeniesAndFailsClosed(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	wh, err := auth.NewWebhook(auth.WebhookConfig{URL: webhookURL(t, &calls, func(r auth.WebhookRequest) int {
		switch {
		case r.RequestedResourceName == "slow-job":
			return 0
		case r.RequestedResourceName == "job-of-b" && r.RequestedPermission == "read":
			return http.StatusForbidden
		default:
			return http.StatusOK
		}
	}), Timeout: 500 * time.Millisecond, CacheTTL: -1})
	require.NoError(t, err)
	e := newAuthEnv(t, func(o *options) { o.webhook = wh })

	r := e.do("GET", "/data-jobs/for-team/team-a/jobs/job-of-a", "", bearer(e.tokA)...)
	require.Equal(t, http.StatusOK, r.status, "allowed: %s", r.body)
	r = e.do("GET", "/data-jobs/for-team/team-b/jobs/job-of-b", "", bearer(e.tokB)...)
	require.Equal(t, http.StatusForbidden, r.status, "denied: %s", r.body)
	r.vdkError(t)
	r = e.do("GET", "/data-jobs/for-team/team-a/jobs/slow-job", "", bearer(e.tokA)...)
	require.Equal(t, http.StatusServiceUnavailable, r.status, "a webhook that does not answer in time denies: %s", r.body)
	r = e.do("GET", "/data-jobs/for-team/team-b/jobs/job-of-b", "", bearer(e.tokA)...)
	require.Equal(t, http.StatusForbidden, r.status, "the team check comes first")
	require.Contains(t, r.vdkError(t)["why"], "not a member")
}

// webhookURL serves status(request) for each call (0: never answers until the test ends).
func webhookURL(t *testing.T, calls *atomic.Int32, status webhookFunc) string {
	t.Helper()
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		var req auth.WebhookRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		code := status(req)
		if code == 0 {
			select {
			case <-done:
			case <-r.Context().Done():
			}
			return
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(func() { close(done); srv.Close() })
	return srv.URL
}
