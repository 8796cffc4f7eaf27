package httpapi_test

import (
	"net/http"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/auth"
	"github.com/datajobs/datajobs/internal/testenv"
)

// Attack (issue 22, item 4): the webhook denies bot-ab (a member of team-a and team-b)
// any read of team-b. The REST route of the GraphQL query asks the webhook only about the
// path's team, and the query answers the rows of every team the caller belongs to: so
// GET /for-team/team-a/jobs?query={jobs...} showed team-b's jobs and executions. Now each
// team whose rows the answer would hold is asked about, and a denied one is left out,
// for a member and an admin alike; a webhook that cannot answer fails the query (503).
func TestGraphQLAsksTheWebhookAboutEveryTeamItAnswers(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	var down atomic.Bool
	wh, err := auth.NewWebhook(auth.WebhookConfig{URL: webhookURL(t, &calls, func(r auth.WebhookRequest) int {
		switch {
		case down.Load() && r.RequestedResourceTeam == "team-b":
			return http.StatusBadGateway
		case r.RequestedResourceTeam == "team-b" && r.RequestedPermission == "read" && r.RequesterUserID != "bot-b":
			return http.StatusForbidden
		default:
			return http.StatusOK
		}
	}), Timeout: 2 * time.Second, CacheTTL: -1})
	require.NoError(t, err)
	e := newAuthEnv(t, func(o *options) { o.webhook = wh })
	e.sql(`INSERT INTO data_job_execution (id, job_name, type, status, op_id, start_time, started_by)
		VALUES ('job-of-b-1', 'job-of-b', 'manual', 'running', 'op', now(), 'bot-b')`)
	both := testenv.OIDC(t).ClientToken(t, "bot-ab", "team-a", "team-b")

	jobs := `{ jobs(pageNumber: 1, pageSize: 50) { content { jobName } totalItems } }`
	executions := `{ executions(pageNumber: 1, pageSize: 10) { content { id } totalItems } }`
	query := func(tok, path, q string) (int, string) {
		t.Helper()
		r := e.do("GET", "/data-jobs/for-team/"+path+"/jobs?query="+url.QueryEscape(q), "", bearer(tok)...)
		return r.status, string(r.body)
	}
	for _, tok := range []string{both, e.tokAdmin} {
		code, body := query(tok, "team-a", jobs)
		require.Equal(t, http.StatusOK, code, body)
		require.Contains(t, body, `{"jobName":"job-of-a"}],"totalItems":1`, "team-b, denied by the webhook, is left out")
		code, body = query(tok, "team-a", executions)
		require.Equal(t, http.StatusOK, code, body)
		require.Contains(t, body, `"totalItems":0`)
		require.NotContains(t, body, "job-of-b-1")
	}
	code, body := query(e.tokB, "team-b", jobs)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `{"jobName":"job-of-b"}],"totalItems":1`, "the webhook allows bot-b its team")

	down.Store(true)
	code, body = query(both, "team-a", jobs)
	require.Equal(t, http.StatusServiceUnavailable, code, "a webhook that fails is no permission: %s", body)
}
