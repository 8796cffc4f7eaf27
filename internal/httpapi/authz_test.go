package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/auth"
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
