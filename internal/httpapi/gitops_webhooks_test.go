package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const hooksPath = "/data-jobs/for-team/team-a/webhooks"

// webhooksFile is teamFile of two jobs with two notification webhooks.
func webhooksFile() string {
	return teamFile("extract-job", "load-job") + `webhooks:
  - {name: ops-slack, url: "https://hooks.example.com/ops", format: slack, events: [job_late, execution_user_error]}
  - {name: audit, url: "https://audit.example.com/in"}
`
}

// hookID is the id of the team-a webhook name, as its list answers it.
func (e *env) hookID(name string) string {
	e.t.Helper()
	r := e.do("GET", hooksPath, "")
	require.Equal(e.t, http.StatusOK, r.status, "%s", r.body)
	var hooks []struct{ ID, Name string }
	r.json(e.t, &hooks)
	for _, h := range hooks {
		if h.Name == name {
			return h.ID
		}
	}
	e.t.Fatalf("no webhook %s in %s", name, r.body)
	return ""
}

func TestWebhooksInTheFileAreAppliedOwnedPrunedAndTheirSecretShownOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const repo = "github.com/acme/jobs"
	r := e.apply(webhooksFile(), "", source, repo+"@abc123")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, "no-store", r.header.Get("Cache-Control"), "an answer with a secret is not cached")
	var created struct {
		Changes []struct {
			Kind, Name, Action string
			WebhookID          string `json:"webhook_id"`
			SigningSecret      string `json:"signing_secret"`
		}
	}
	r.json(t, &created)
	secrets := map[string]string{}
	for _, c := range created.Changes {
		if c.Kind == "webhook" {
			require.Equal(t, "create", c.Action, c.Name)
			require.Equal(t, e.hookID(c.Name), c.WebhookID)
			require.True(t, strings.HasPrefix(c.SigningSecret, "whsec_"), "%s", r.body)
			secrets[c.Name] = c.SigningSecret
		}
	}
	require.Len(t, secrets, 2)
	r = e.do("GET", hooksPath+"/"+e.hookID("ops-slack"), "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.NotContains(t, string(r.body), "whsec_", "the secret is shown once, by the apply")
	require.Contains(t, string(r.body), `"slack"`)

	// Unchanged: no write, no secret. Changed: updated in place, the id kept.
	p := e.plan(webhooksFile(), "dry_run=true", source, repo+"@abc123")
	require.Equal(t, "unchanged", p.actions()["webhook/audit"])
	id := e.hookID("audit")
	next := strings.Replace(webhooksFile(), `url: "https://audit.example.com/in"}`, `url: "https://audit.example.com/v2", events: [deploy_failed]}`, 1)
	p = e.plan(next, "", source, repo+"@def456")
	require.Equal(t, "update", p.actions()["webhook/audit"])
	for _, c := range p.Changes {
		if c.Name == "audit" {
			require.Len(t, c.Diff, 2, "%+v", c.Diff)
		}
	}
	require.Equal(t, id, e.hookID("audit"), "an update keeps the webhook")

	// Owned: hand changes are refused naming the file; the export applies with an empty plan.
	for _, method := range []string{"PUT", "DELETE"} {
		r = e.do(method, hooksPath+"/"+id, `{"url":"https://hand.example.com/x"}`)
		require.Equal(t, http.StatusConflict, r.status, "%s %s", method, r.body)
		require.Contains(t, r.vdkError(t)["what"], repo)
	}
	r = e.do("GET", "/data-jobs/for-team/team-a/export", "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Contains(t, string(r.body), "audit.example.com/v2")
	require.NotContains(t, string(r.body), "whsec_")
	p = e.plan(string(r.body), "prune=true", source, repo+"@def456")
	require.False(t, p.Applied)
	require.Equal(t, map[string]int{"unchanged": 5}, p.Summary, "%+v", p.Changes)

	// A hand-made webhook is never pruned; the owned one the file dropped is.
	e.do("POST", hooksPath, `{"name":"hand-made","url":"https://hooks.example.com/hand"}`)
	dropped := strings.Replace(next, "  - {name: ops-slack, url: \"https://hooks.example.com/ops\", format: slack, events: [job_late, execution_user_error]}\n", "", 1)
	p = e.plan(dropped, "prune=true", source, repo+"@ghi789")
	require.Equal(t, "delete", p.actions()["webhook/ops-slack"])
	require.NotContains(t, p.actions(), "webhook/hand-made")
	require.Equal(t, 2, e.count(`SELECT count(*) FROM team_webhook WHERE team = 'team-a'`))

	r = e.do("POST", "/data-jobs/for-team/team-a/release-from-file?webhook=audit", "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.JSONEq(t, `{"released":1}`, string(r.body))
	r = e.do("PUT", hooksPath+"/"+id, `{"url":"https://hand.example.com/x"}`)
	require.Equal(t, http.StatusOK, r.status, "a released webhook is the API's again: %s", r.body)
}

func TestAnInvalidWebhookInTheMiddleCommitsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	three := webhooksFile() + "  - {name: third, url: \"https://third.example.com/in\"}\n"
	bad := strings.Replace(three, "url: \"https://audit.example.com/in\"", "url: \"https://audit.example.com/in\", events: [sometimes]", 1)
	r := e.apply(bad, "")
	require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
	require.Contains(t, r.vdkError(t)["what"], `webhooks[1] ("audit")`)
	bad = strings.Replace(three, "format: slack", "format: teams", 1)
	r = e.apply(bad, "")
	require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
	require.Contains(t, r.vdkError(t)["what"], `webhooks[0] ("ops-slack")`)

	// A failure only the writes meet (the team's webhook quota, at the second webhook)
	// rolls back the writes before it.
	for i := range 19 {
		r = e.do("POST", hooksPath, `{"name":"hand-`+string(rune('a'+i))+`","url":"https://hooks.example.com/hand"}`)
		require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	}
	r = e.apply(three, "")
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	require.Contains(t, r.vdkError(t)["what"], `webhooks[1] ("audit")`)
	require.Equal(t, 0, e.count(`SELECT count(*) FROM data_job WHERE team = 'team-a'`), "nothing committed")
	require.Equal(t, 19, e.count(`SELECT count(*) FROM team_webhook WHERE team = 'team-a'`))
}
