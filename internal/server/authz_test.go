package server_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/auth"
	"github.com/datajobs/datajobs/internal/httpapi"
	"github.com/datajobs/datajobs/internal/server"
	"github.com/datajobs/datajobs/internal/testenv"
	"github.com/datajobs/datajobs/internal/testzip"
	"github.com/datajobs/datajobs/internal/ui"
)

// routeCase is a request against team-b's job on one route; the path's parameters are
// filled in by fill. A route the server serves without a case fails the test below.
type routeCase struct {
	body, contentType string
	public            bool // no caller needed: the probes, the console's assets and sign-in
	anyCaller         bool // a REST route that names no team: authentication only
	filtered          bool // any caller, only its teams' rows: the jobs query, the console's list
	ownTeam           bool // a console page of a team (not of a job): under the caller's own team it answers
	adminOnly         bool // a REST route of the admin teams only (execution profiles): 403 to team members
	signed            bool // authenticated by a signature of its body, not by a token (a trigger's invocation)
}

// routeCases covers every route of the public listener: the probes, the REST API (with
// the GraphQL query) and the web console.
var routeCases = map[string]routeCase{
	"GET /healthz": {public: true},
	"GET /readyz":  {public: true},
	"GET /{$}":     {public: true}, // a redirect to the console

	"GET /data-jobs/for-team/{team}/info":                                                                  {},
	"POST /data-jobs/for-team/{team}/jobs":                                                                 {body: `{"job_name":"new-in-b","description":"d"}`},
	"GET /data-jobs/for-team/{team}/jobs":                                                                  {filtered: true},
	"GET /data-jobs/for-team/{team}/jobs/{job}":                                                            {},
	"PUT /data-jobs/for-team/{team}/jobs/{job}":                                                            {body: `{"job_name":"job-of-b","description":"changed"}`},
	"DELETE /data-jobs/for-team/{team}/jobs/{job}":                                                         {},
	"PUT /data-jobs/for-team/{team}/jobs/{job}/team/{new_team}":                                            {},
	"GET /data-jobs/for-team/{team}/jobs/{job}/deployments":                                                {},
	"POST /data-jobs/for-team/{team}/jobs/{job}/deployments":                                               {body: `{"job_version":"v2"}`},
	"GET /data-jobs/for-team/{team}/jobs/{job}/deployments/{deployment_id}":                                {},
	"PATCH /data-jobs/for-team/{team}/jobs/{job}/deployments/{deployment_id}":                              {body: `{"enabled":false}`},
	"DELETE /data-jobs/for-team/{team}/jobs/{job}/deployments/{deployment_id}":                             {},
	"GET /data-jobs/for-team/{team}/jobs/{job}/deployments/{deployment_id}/properties":                     {},
	"PUT /data-jobs/for-team/{team}/jobs/{job}/deployments/{deployment_id}/properties":                     {body: `{"secret":"stolen"}`},
	"GET /data-jobs/for-team/{team}/jobs/{job}/deployments/{deployment_id}/executions":                     {},
	"GET /data-jobs/for-team/{team}/jobs/{job}/deployments/{deployment_id}/revisions":                      {},
	"POST /data-jobs/for-team/{team}/jobs/{job}/deployments/{deployment_id}/revisions/{revision}/rollback": {},
	"GET /data-jobs/for-team/{team}/audit":                                                                 {},
	"POST /data-jobs/for-team/{team}/jobs/{job}/deployments/{deployment_id}/executions":                    {body: `{}`},
	"POST /data-jobs/for-team/{team}/jobs/{job}/deployments/{deployment_id}/backfills":                     {body: `{"from":"2026-01-01T00:00:00Z","to":"2026-01-05T23:00:00Z"}`},
	"GET /data-jobs/for-team/{team}/jobs/{job}/deployments/{deployment_id}/backfills":                      {},
	"GET /data-jobs/for-team/{team}/jobs/{job}/deployments/{deployment_id}/backfills/{backfill_id}":        {},
	"DELETE /data-jobs/for-team/{team}/jobs/{job}/deployments/{deployment_id}/backfills/{backfill_id}":     {},
	"GET /data-jobs/for-team/{team}/jobs/{job}/deployments/{deployment_id}/secrets":                        {},
	"PUT /data-jobs/for-team/{team}/jobs/{job}/deployments/{deployment_id}/secrets":                        {body: `{"k":"v"}`},
	"GET /data-jobs/for-team/{team}/jobs/{job}/executions":                                                 {},
	"GET /data-jobs/for-team/{team}/jobs/{job}/executions/{execution_id}":                                  {},
	"DELETE /data-jobs/for-team/{team}/jobs/{job}/executions/{execution_id}":                               {},
	"GET /data-jobs/for-team/{team}/jobs/{job}/executions/{execution_id}/logs":                             {},
	"GET /data-jobs/for-team/{team}/jobs/{job}/keytab":                                                     {},
	"POST /data-jobs/for-team/{team}/jobs/{job}/sources":                                                   {body: "PK\x05\x06" + strings.Repeat("\x00", 18), contentType: "application/octet-stream"},
	"GET /data-jobs/for-team/{team}/jobs/{job}/sources":                                                    {},
	"DELETE /data-jobs/for-team/{team}/jobs/{job}/sources":                                                 {},
	"GET /data-jobs/for-team/{team}/jobs/{job}/notifications":                                              {},
	"GET /data-jobs/for-team/{team}/webhooks":                                                              {},
	"POST /data-jobs/for-team/{team}/webhooks":                                                             {body: `{"name":"planted","url":"https://evil.example.com/"}`},
	"GET /data-jobs/for-team/{team}/webhooks/{webhook_id}":                                                 {},
	"PUT /data-jobs/for-team/{team}/webhooks/{webhook_id}":                                                 {body: `{"url":"https://evil.example.com/","rotate_secret":true}`},
	"DELETE /data-jobs/for-team/{team}/webhooks/{webhook_id}":                                              {},
	"PUT /data-jobs/for-team/{team}/jobs/{job}/grants/{grantee_team}":                                      {},
	"DELETE /data-jobs/for-team/{team}/jobs/{job}/grants/{grantee_team}":                                   {},
	"GET /data-jobs/profiles":                                                                              {adminOnly: true},
	"GET /data-jobs/profiles/{profile}":                                                                    {adminOnly: true},
	"PUT /data-jobs/profiles/{profile}":                                                                    {adminOnly: true, body: `{"teams":["team-a"],"node_selector":{"pool":"stolen"}}`},
	"DELETE /data-jobs/profiles/{profile}":                                                                 {adminOnly: true},
	"GET /data-jobs/profiles/{profile}/revisions":                                                          {adminOnly: true},
	"GET /data-jobs/targets":                                                                               {adminOnly: true},
	"GET /data-jobs/targets/{target}":                                                                      {adminOnly: true},
	"PUT /data-jobs/targets/{target}":                                                                      {adminOnly: true, body: `{"namespace":"stolen","cluster":"local","default_for":["team-b"]}`},
	"DELETE /data-jobs/targets/{target}":                                                                   {adminOnly: true},
	"GET /data-jobs/for-team/{team}/pipelines":                                                             {},
	"PUT /data-jobs/for-team/{team}/pipelines/{pipeline}":                                                  {body: `{"nodes":[{"name":"stolen-node","job_name":"job-of-b","team":"team-b"}]}`},
	"GET /data-jobs/for-team/{team}/pipelines/{pipeline}":                                                  {},
	"DELETE /data-jobs/for-team/{team}/pipelines/{pipeline}":                                               {},
	"POST /data-jobs/for-team/{team}/pipelines/{pipeline}/runs":                                            {body: `{}`},
	"GET /data-jobs/for-team/{team}/pipelines/{pipeline}/runs":                                             {},
	"GET /data-jobs/for-team/{team}/pipelines/{pipeline}/runs/{run_id}":                                    {},
	"DELETE /data-jobs/for-team/{team}/pipelines/{pipeline}/runs/{run_id}":                                 {},
	"POST /data-jobs/for-team/{team}/pipelines/{pipeline}/runs/{run_id}/repair":                            {},
	"POST /data-jobs/for-team/{team}/pipelines/{pipeline}/backfills":                                       {body: `{"from":"2026-01-01T00:00:00Z","to":"2026-01-02T00:00:00Z"}`},
	"POST /data-jobs/for-team/{team}/triggers":                                                             {body: `{"name":"planted","target":{"job_name":"job-of-b"},"on":{"kind":"webhook"}}`},
	"GET /data-jobs/for-team/{team}/triggers":                                                              {},
	"GET /data-jobs/for-team/{team}/triggers/{trigger}":                                                    {},
	"DELETE /data-jobs/for-team/{team}/triggers/{trigger}":                                                 {},
	"GET /data-jobs/for-team/{team}/triggers/{trigger}/events":                                             {},
	"POST /data-jobs/triggers/{trigger_id}/events":                                                         {body: `{"forged":true}`, signed: true},
	"GET /data-jobs/teams/{team}/oauth-credentials":                                                        {},
	"PUT /data-jobs/teams/{team}/oauth-credentials":                                                        {body: `{"clientId":"x","clientSecret":"y"}`},
	"GET /data-jobs/teams/{team}/oauth-credentials/client-id":                                              {},
	"POST /data-jobs/oauth-credentials/client-ids":                                                         {body: `["x"]`, anyCaller: true},

	// Jobs as code (internal/httpapi/gitops.go).
	"POST /data-jobs/for-team/{team}/apply":             {body: `{"apiVersion":"datajobs.io/v1","team":"team-b","jobs":[{"job_name":"job-of-b","description":"changed"}]}`},
	"POST /data-jobs/for-team/{team}/sources":           {body: "PK\x05\x06" + strings.Repeat("\x00", 18), contentType: "application/octet-stream"},
	"GET /data-jobs/for-team/{team}/export":             {},
	"POST /data-jobs/for-team/{team}/release-from-file": {},
	"GET /data-jobs/schema/datajobs.yaml.json":          {anyCaller: true},

	"GET /ui/static/":                                          {public: true},
	"GET /ui/login":                                            {public: true},
	"GET /ui/callback":                                         {public: true},
	"POST /ui/logout":                                          {public: true},
	"GET /ui/{$}":                                              {filtered: true},
	"GET /ui/teams/{team}/jobs/{job}":                          {},
	"GET /ui/teams/{team}/jobs/{job}/deployment":               {},
	"GET /ui/teams/{team}/jobs/{job}/executions":               {},
	"GET /ui/teams/{team}/jobs/{job}/executions/{id}":          {},
	"GET /ui/teams/{team}/jobs/{job}/executions/{id}/logs":     {},
	"POST /ui/teams/{team}/jobs/{job}/enable":                  {},
	"POST /ui/teams/{team}/jobs/{job}/disable":                 {},
	"POST /ui/teams/{team}/jobs/{job}/run":                     {},
	"POST /ui/teams/{team}/jobs/{job}/delete-deployment":       {},
	"POST /ui/teams/{team}/jobs/{job}/properties":              {},
	"POST /ui/teams/{team}/jobs/{job}/executions/{id}/cancel":  {},
	"POST /ui/teams/{team}/jobs/{job}/executions/{id}/rerun":   {},
	"POST /ui/teams/{team}/jobs/{job}/backfills":               {},
	"POST /ui/teams/{team}/jobs/{job}/backfills/{id}/cancel":   {},
	"POST /ui/teams/{team}/jobs/{job}/revisions/{id}/rollback": {},
	"GET /ui/teams/{team}/jobs/{job}/sources":                  {},
	"GET /ui/teams/{team}/health":                              {ownTeam: true},
	"GET /ui/teams/{team}/webhooks":                            {ownTeam: true},
	"POST /ui/teams/{team}/webhooks":                           {ownTeam: true},
	"POST /ui/teams/{team}/webhooks/{id}/delete":               {},

	// The pipeline pages (internal/ui/pipeline.go).
	"GET /ui/teams/{team}/pipelines":                                  {ownTeam: true},
	"GET /ui/teams/{team}/pipelines/{pipeline}":                       {},
	"POST /ui/teams/{team}/pipelines/{pipeline}/run":                  {},
	"GET /ui/teams/{team}/pipelines/{pipeline}/runs/{run_id}":         {},
	"POST /ui/teams/{team}/pipelines/{pipeline}/runs/{run_id}/cancel": {},
	"POST /ui/teams/{team}/pipelines/{pipeline}/runs/{run_id}/repair": {},
}

// routes are the patterns the public listener serves, the routers mounted on it expanded:
// the console at ui.Prefix and the REST API at /.
func routes(t *testing.T) []string {
	t.Helper()
	console, err := ui.New(ui.Config{Logger: slog.New(slog.DiscardHandler)}, nil)
	require.NoError(t, err)
	mounted := map[string][]string{ui.Prefix: console.Patterns(), "/": httpapi.Patterns(httpapi.Config{JobsQuery: http.NotFoundHandler()})}
	public, _ := server.Patterns()
	var out []string
	for _, p := range public {
		if m, ok := mounted[p]; ok {
			out = append(out, m...)
		} else {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// TestEveryRouteIsAuthenticatedAndKeepsTeamsApart walks every route the server serves,
// REST API and web console alike, as a member of team-a against team-b's job: without
// credentials every route but the public ones is refused; with team-a's, each is
// refused or shows nothing of team-b, and nothing of team-b changes. A route added
// without a case fails here.
func TestEveryRouteIsAuthenticatedAndKeepsTeamsApart(t *testing.T) {
	t.Parallel()
	p := testenv.OIDC(t)
	clientID := fmt.Sprintf("console-authz-%d", time.Now().UnixNano()) // the provider outlives the test
	addr, dbURL, ns := testenv.FreeAddr(t), testenv.DatabaseURL(t), testenv.Namespace(t)
	base, _, _ := serve(t, server.Config{
		Listen: addr, Namespace: ns,
		DatabaseURL: dbURL, SyncMode: server.SyncOff,
		Auth: server.AuthConfig{Mode: server.AuthOIDC, OIDC: auth.OIDCConfig{
			IssuerURLs: []string{p.IssuerURL}, Audience: testenv.Audience, UsernameClaim: "username", AdminTeams: []string{"platform"},
		}},
		UI:      server.UIConfig{OIDCClientID: clientID, PublicURL: "http://" + addr},
		Secrets: server.SecretsConfig{KeyFile: testenv.SecretsKeyFile(t)},
	})
	p.NewBrowserClient(t, clientID, base+"/ui/callback")
	require.Eventually(t, func() bool { code, _ := get(t, base+"/readyz"); return code == http.StatusOK }, 30*time.Second, 50*time.Millisecond)
	c := &caller{t: t, base: base}
	tokA, tokB, tokAdmin := p.ClientToken(t, "bot-a", "team-a"), p.ClientToken(t, "bot-b", "team-b"), p.ClientToken(t, "ops", "platform")

	// team-a's job, and team-b's deployed job with properties, sources and an execution.
	c.must(tokA, "POST", "/data-jobs/for-team/team-a/jobs", `{"job_name":"job-of-a","description":"d"}`, http.StatusCreated)
	c.must(tokB, "POST", "/data-jobs/for-team/team-b/jobs", `{"job_name":"job-of-b","description":"secret plans of b","config":{"schedule":{"schedule_cron":"15 10 * * *"}}}`, http.StatusCreated)
	c.must(tokB, "POST", "/data-jobs/for-team/team-b/jobs/job-of-b/deployments", `{"job_version":"v1-of-b","enabled":true}`, http.StatusAccepted)
	c.must(tokB, "PUT", "/data-jobs/for-team/team-b/jobs/job-of-b/deployments/release/properties", `{"secret":"of-b"}`, http.StatusNoContent)
	c.must(tokB, "PUT", "/data-jobs/for-team/team-b/jobs/job-of-b/deployments/release/secrets", `{"password":"of-b"}`, http.StatusAccepted)
	c.must(tokB, "PUT", "/data-jobs/teams/team-b/oauth-credentials", `{"clientId":"client-of-b","clientSecret":"of-b"}`, http.StatusAccepted)
	c.must(tokB, "POST", "/data-jobs/for-team/team-b/jobs/job-of-b/sources", sources(t), http.StatusOK, "Content-Type", "application/octet-stream")
	c.must(tokAdmin, "PUT", "/data-jobs/profiles/profile-of-b", `{"teams":["team-b"],"node_selector":{"pool":"of-b"}}`, http.StatusOK)
	c.must(tokB, "PATCH", "/data-jobs/for-team/team-b/jobs/job-of-b/deployments/release", `{"execution_profile":"profile-of-b"}`, http.StatusAccepted)
	var exec struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.Unmarshal([]byte(c.must(tokB, "POST", "/data-jobs/for-team/team-b/jobs/job-of-b/deployments/release/executions", `{}`, http.StatusAccepted)), &exec))
	require.NotEmpty(t, exec.ID)
	var backfill struct {
		ID int64 `json:"id"`
	}
	require.NoError(t, json.Unmarshal([]byte(c.must(tokB, "POST", "/data-jobs/for-team/team-b/jobs/job-of-b/deployments/release/backfills",
		`{"from":"2026-01-01T00:00:00Z","to":"2026-01-03T23:00:00Z"}`, http.StatusCreated)), &backfill))
	var hook struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.Unmarshal([]byte(c.must(tokB, "POST", "/data-jobs/for-team/team-b/webhooks", `{"name":"hook-of-b","url":"https://hooks.example.com/of-b"}`, http.StatusCreated)), &hook))
	c.must(tokB, "PUT", "/data-jobs/for-team/team-b/pipelines/pipeline-of-b",
		`{"description":"secret plans of b","nodes":[{"name":"node-of-b","job_name":"job-of-b"}]}`, http.StatusCreated)
	var run struct {
		ID int64 `json:"id"`
	}
	require.NoError(t, json.Unmarshal([]byte(c.must(tokB, "POST", "/data-jobs/for-team/team-b/pipelines/pipeline-of-b/runs", `{}`, http.StatusAccepted)), &run))
	var trig struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.Unmarshal([]byte(c.must(tokB, "POST", "/data-jobs/for-team/team-b/triggers",
		`{"name":"trigger-of-b","target":{"job_name":"job-of-b"},"on":{"kind":"webhook"}}`, http.StatusCreated)), &trig))
	fill := func(pattern, team string) (method, path string) {
		method, path, _ = strings.Cut(pattern, " ")
		return method, strings.NewReplacer("{$}", "", "{team}", team, "{job}", "job-of-b", "{deployment_id}", "release",
			"{execution_id}", exec.ID, "{id}", exec.ID, "{new_team}", "team-a", "{revision}", "1", "{webhook_id}", hook.ID,
			"{backfill_id}", strconv.FormatInt(backfill.ID, 10), "{pipeline}", "pipeline-of-b", "{run_id}", strconv.FormatInt(run.ID, 10),
			"{grantee_team}", "team-a", "{profile}", "profile-of-b", "{target}", "default",
			"{trigger}", "trigger-of-b", "{trigger_id}", trig.ID).Replace(path)
	}
	// stateOfB is everything a caller of team-b can read about its job.
	stateOfB := func() []string {
		var out []string
		for _, p := range []string{"", "/deployments/release", "/deployments/release/properties", "/deployments/release/secrets", "/sources", "/executions", "/deployments/release/backfills"} {
			out = append(out, c.must(tokB, "GET", "/data-jobs/for-team/team-b/jobs/job-of-b"+p, "", http.StatusOK))
		}
		for _, p := range []string{"", "/runs", "/runs/" + strconv.FormatInt(run.ID, 10)} {
			out = append(out, c.must(tokB, "GET", "/data-jobs/for-team/team-b/pipelines/pipeline-of-b"+p, "", http.StatusOK))
		}
		out = append(out, c.must(tokB, "GET", "/data-jobs/teams/team-b/oauth-credentials", "", http.StatusOK))
		out = append(out, c.must(tokAdmin, "GET", "/data-jobs/profiles/profile-of-b", "", http.StatusOK))
		out = append(out, c.must(tokB, "GET", "/data-jobs/for-team/team-b/triggers/trigger-of-b/events", "", http.StatusOK))
		return append(out, c.must(tokB, "GET", "/data-jobs/for-team/team-b/webhooks", "", http.StatusOK))
	}
	before := stateOfB()

	// alice of team-a, signed in to the console; a browser without a session.
	alice, stranger := c.browser(), c.browser()
	token := testenv.CSRFToken(t, p.SignIn(t, alice, c.base+"/ui/", "alice", "team-a"))
	// showsNothingOfB fails the test when a body shows team-b's job, unless the path names it.
	showsNothingOfB := func(method, path, body string) {
		if strings.HasSuffix(path, "/team-a/audit") {
			// team-a's log holds the paths team-a's callers asked for, team-b's job among
			// them (refused): it must hold no request of team-b's callers.
			assert.NotContains(t, body, `"actor":"bot-b"`, "team-a's audit log shows a write of team-b")
			return
		}
		for _, secret := range []string{"job-of-b", "secret plans of b", "of-b", "v1-of-b", "hook-of-b"} {
			if strings.Contains(body, secret) && !strings.Contains(path, secret) {
				t.Errorf("%s %s shows %q of team-b", method, path, secret)
			}
		}
	}

	patterns := routes(t)
	require.Greater(t, len(patterns), len(routeCases)/2, "the routes of the REST API and the console are listed")
	for _, pattern := range patterns {
		rc, ok := routeCases[pattern]
		if !ok {
			t.Errorf("route %q has no case in routeCases: add one, with the request that team-a must not be allowed to make on team-b's job", pattern)
			continue
		}
		method, path := fill(pattern, "team-b")
		if rc.public { // served to anyone, and showing nothing of any team
			r := c.form(c.browser(), method, path, url.Values{})
			assert.Less(t, r.status, 500, "%s: %s", pattern, r.body)
			showsNothingOfB(method, path, r.body)
			continue
		}
		if strings.HasPrefix(path, ui.Prefix) {
			form := url.Values{"csrf": {token}, "properties": {`{"stolen":true}`}}
			// No session: sign in first (a redirect for a page, 401 for an action).
			r := c.form(stranger, method, path, form)
			if method == http.MethodGet {
				assert.Equal(t, http.StatusSeeOther, r.status, "%s without a session", pattern)
				assert.True(t, strings.HasPrefix(r.header.Get("Location"), "/ui/login?"), "%s without a session: %s", pattern, r.header.Get("Location"))
			} else {
				assert.Equal(t, http.StatusUnauthorized, r.status, "%s without a session", pattern)
			}
			// alice: team-b's job under its own team is forbidden, under alice's team not found.
			for _, team := range []string{"team-b", "team-a"} {
				method, path := fill(pattern, team)
				r := c.form(alice, method, path, form)
				switch {
				case rc.filtered:
					require.Equal(t, http.StatusOK, r.status)
				case team == "team-b":
					assert.Equal(t, http.StatusForbidden, r.status, "%s %s", method, path)
				case rc.ownTeam:
					assert.Less(t, r.status, 500, "%s %s: %s", method, path, r.body)
				default:
					assert.Equal(t, http.StatusNotFound, r.status, "%s %s: %s", method, path, r.body)
				}
				showsNothingOfB(method, path, r.body)
			}
			continue
		}

		headers := []string{}
		if rc.body != "" {
			headers = append(headers, "Content-Type", cmp.Or(rc.contentType, "application/json"))
		}
		method, path = fill(pattern, "team-b")
		if rc.signed { // no token asked, and none is enough: without the signature 401, nothing recorded
			for _, tok := range []string{"", tokA, tokB, tokAdmin} {
				r := c.do(tok, method, path, rc.body, headers...)
				require.Equal(t, http.StatusUnauthorized, r.status, "%s with token %q: %s", pattern, tok, r.body)
				require.Contains(t, vdkError(t, r)["what"], "not signed", pattern)
				showsNothingOfB(method, path, r.body)
			}
			continue
		}
		// No token: 401 with the challenge, whatever the route.
		r := c.do("", method, path, rc.body, headers...)
		require.Equal(t, http.StatusUnauthorized, r.status, "%s without a token: %s", pattern, r.body)
		require.Contains(t, r.header.Get("WWW-Authenticate"), "Bearer", pattern)
		vdkError(t, r)

		// team-a's caller on team-b's job (moving it into team-a): 403 naming team-b.
		r = c.do(tokA, method, path, rc.body, headers...)
		switch {
		case rc.filtered:
			require.Equal(t, http.StatusOK, r.status, "%s by team-a: %s", pattern, r.body)
			require.NotContains(t, r.body, "job-of-b", "%s: team-b's rows never reach team-a", pattern)
			continue
		case rc.anyCaller:
			require.NotEqual(t, http.StatusForbidden, r.status, pattern)
			require.NotEqual(t, http.StatusUnauthorized, r.status, pattern)
			continue
		case rc.adminOnly: // a team's member, of any team: 403 naming the admin teams
			require.Equal(t, http.StatusForbidden, r.status, "%s by team-a: %s", pattern, r.body)
			require.Contains(t, vdkError(t, r)["why"], "admin teams", pattern)
			continue
		}
		require.Equal(t, http.StatusForbidden, r.status, "%s by team-a: %s", pattern, r.body)
		require.Contains(t, vdkError(t, r)["what"], "team-b", pattern)

		// team-a's caller naming team-b's job under its own team: never a success.
		method, path = fill(pattern, "team-a")
		r = c.do(tokA, method, path, rc.body, headers...)
		if strings.Contains(pattern, "{job}") {
			require.GreaterOrEqual(t, r.status, 400, "%s: team-b's job through team-a's path: %s", pattern, r.body)
		}
		named := path
		if rc.body != "" {
			named += " " + rc.body // an error may name what the request named
		}
		showsNothingOfB(method, named, r.body)
	}
	require.Equal(t, before, stateOfB(), "team-b's job is as it was")

	// The admin listener's own routes are not served on the public port.
	public, adminOnly := server.Patterns()
	for _, pattern := range adminOnly {
		if slices.Contains(public, pattern) {
			continue
		}
		method, path := fill(pattern, "team-b")
		r := c.do(tokAdmin, method, path, "")
		assert.Equal(t, http.StatusNotFound, r.status, "%s on the public port: %.200s", pattern, r.body)
	}

	// team-b's own caller and the admin reach team-b's job, by the API and the console.
	for _, who := range []struct {
		tok, user, team string
	}{{tokB, "bob", "team-b"}, {tokAdmin, "ops", "platform"}} {
		c.must(who.tok, "GET", "/data-jobs/for-team/team-b/jobs/job-of-b", "", http.StatusOK)
		b := c.browser()
		p.SignIn(t, b, c.base+"/ui/", who.user, who.team)
		r := c.form(b, http.MethodGet, "/ui/teams/team-b/jobs/job-of-b", nil)
		require.Equal(t, http.StatusOK, r.status, r.body)
		assert.Contains(t, r.body, "secret plans of b")
	}
	checkJobCaller(t, c, dbURL, ns, patterns, fill)
}

// caller makes requests to the server: with a bearer token as API clients do, or with a
// browser's cookies as the console's users do.
type caller struct {
	t    *testing.T
	base string
}

type response struct {
	status int
	header http.Header
	body   string
}

func (c *caller) send(client *http.Client, req *http.Request) response {
	c.t.Helper()
	resp, err := client.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	return response{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// do calls the API with token (none when empty) and header name/value pairs.
func (c *caller) do(token, method, path, body string, headers ...string) response {
	c.t.Helper()
	req, err := http.NewRequestWithContext(c.t.Context(), method, c.base+path, strings.NewReader(body))
	require.NoError(c.t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return c.send(http.DefaultClient, req)
}

// must calls the API, requires the status and returns the body.
func (c *caller) must(token, method, path, body string, want int, headers ...string) string {
	c.t.Helper()
	if body != "" && len(headers) == 0 {
		headers = []string{"Content-Type", "application/json"}
	}
	r := c.do(token, method, path, body, headers...)
	require.Equal(c.t, want, r.status, "%s %s: %s", method, path, r.body)
	return r.body
}

// browser is an HTTP client with cookies that does not follow redirects by itself.
func (c *caller) browser() *http.Client {
	jar, err := cookiejar.New(nil)
	require.NoError(c.t, err)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// form requests a console page (GET) or posts an action's form (POST) as browser b.
func (c *caller) form(b *http.Client, method, path string, form url.Values) response {
	c.t.Helper()
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader(form.Encode())
	}
	u := path
	if strings.HasPrefix(path, "/") {
		u = c.base + path
	}
	req, err := http.NewRequestWithContext(c.t.Context(), method, u, body)
	require.NoError(c.t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	return c.send(b, req)
}

// vdkError requires a VDK error body and returns it.
func vdkError(t *testing.T, r response) map[string]string {
	t.Helper()
	var e map[string]string
	require.NoError(t, json.Unmarshal([]byte(r.body), &e), "a VDK error body: %s", r.body)
	for _, k := range []string{"what", "why", "consequences", "countermeasures"} {
		require.NotEmpty(t, e[k], "error body lacks %s: %s", k, r.body)
	}
	return e
}

// sources is a small job directory as vdk deploy zips it.
func sources(t *testing.T) string {
	t.Helper()
	return string(testzip.Dir(t, map[string]string{
		"job-of-b/config.ini":        "[owner]\nteam = team-b\n",
		"job-of-b/20_python_step.py": "def run(job_input):\n    pass\n",
	}))
}
