package httpapi_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/auth"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/notify"
	"github.com/datajobs/datajobs/internal/secrets"
	"github.com/datajobs/datajobs/internal/testenv"
)

// webhook is a Webhook as the API answers it.
type webhook struct {
	ID        string   `json:"id"`
	Team      string   `json:"team"`
	Name      string   `json:"name"`
	URL       string   `json:"url"`
	Format    string   `json:"format"`
	Events    []string `json:"events"`
	CreatedBy string   `json:"created_by"`
	UpdatedBy string   `json:"updated_by"`
	Secret    string   `json:"secret"`
}

// hooksEnv is the API in auth mode oidc with a token of team-a and one of team-b.
type hooksEnv struct {
	*env
	tokA, tokB string
}

func newHooksEnv(t *testing.T, opts ...func(*options)) *hooksEnv {
	t.Helper()
	p := testenv.OIDC(t)
	verifier, err := auth.NewOIDC(auth.OIDCConfig{IssuerURLs: []string{p.IssuerURL}, Audience: testenv.Audience, UsernameClaim: "username"})
	require.NoError(t, err)
	return &hooksEnv{
		env:  newEnv(t, append([]func(*options){func(o *options) { o.auth = verifier }}, opts...)...),
		tokA: p.ClientToken(t, "bot-a", "team-a"), tokB: p.ClientToken(t, "bot-b", "team-b"),
	}
}

// as makes a request as tok and checks its status.
func (e *hooksEnv) as(tok, method, path, body string, want int) response {
	e.t.Helper()
	r := e.do(method, path, body, bearer(tok)...)
	require.Equal(e.t, want, r.status, "%s %s: %s", method, path, r.body)
	return r
}

const hooksB = "/data-jobs/for-team/team-b/webhooks"

// A team's webhook through its whole life: created with its defaults and a secret shown
// once, listed and read without it, changed field by field, its secret rotated (the new
// one shown once, and the one the store gives the dispatcher), deleted. The secret never
// appears in a read or in the server's logs.
func TestATeamWebhookIsCreatedReadChangedRotatedAndDeleted(t *testing.T) {
	t.Parallel()
	e := newHooksEnv(t)
	r := e.as(e.tokB, "POST", hooksB, `{"name":"on-call","url":"https://hooks.example.com/datajobs"}`, http.StatusCreated)
	var created webhook
	r.json(t, &created)
	assert.Equal(t, hooksB+"/"+created.ID, r.header.Get("Location"))
	assert.Equal(t, "no-store", r.header.Get("Cache-Control"))
	assert.Equal(t, webhook{
		ID: created.ID, Team: "team-b", Name: "on-call", URL: "https://hooks.example.com/datajobs",
		Format: "standard", Events: sortedEvents(), CreatedBy: "bot-b", UpdatedBy: "bot-b", Secret: created.Secret,
	}, created)
	require.True(t, strings.HasPrefix(created.Secret, "whsec_"), created.Secret)
	secrets := []string{created.Secret}
	assert.Equal(t, created.Secret, "whsec_"+base64.StdEncoding.EncodeToString(storedSecret(t, e, created.ID)),
		"the secret answered is the key the dispatcher signs with")

	var listed []webhook
	e.as(e.tokB, "GET", hooksB, "", http.StatusOK).json(t, &listed)
	require.Len(t, listed, 1)
	assert.Empty(t, listed[0].Secret)
	var read webhook
	e.as(e.tokB, "GET", hooksB+"/"+created.ID, "", http.StatusOK).json(t, &read)
	created.Secret = ""
	assert.Equal(t, created, read)

	var changed webhook
	e.as(e.tokB, "PUT", hooksB+"/"+created.ID, `{"format":"slack","events":["execution_user_error","deploy_failed","deploy_failed"]}`, http.StatusOK).json(t, &changed)
	assert.Equal(t, "on-call", changed.Name, "a field not given stays")
	assert.Equal(t, "slack", changed.Format)
	assert.Equal(t, []string{"deploy_failed", "execution_user_error"}, changed.Events, "sorted, once each")
	assert.Empty(t, changed.Secret, "no rotation, no secret")

	var rotated webhook
	r = e.as(e.tokB, "PUT", hooksB+"/"+created.ID, `{"rotate_secret":true}`, http.StatusOK)
	r.json(t, &rotated)
	assert.Equal(t, "no-store", r.header.Get("Cache-Control"))
	require.True(t, strings.HasPrefix(rotated.Secret, "whsec_"))
	assert.NotEqual(t, secrets[0], rotated.Secret)
	secrets = append(secrets, rotated.Secret)
	assert.Equal(t, rotated.Secret, "whsec_"+base64.StdEncoding.EncodeToString(storedSecret(t, e, created.ID)))
	assert.Equal(t, []string{"deploy_failed", "execution_user_error"}, rotated.Events, "a rotation changes nothing else")

	for _, path := range []string{hooksB, hooksB + "/" + created.ID} {
		body := string(e.as(e.tokB, "GET", path, "", http.StatusOK).body)
		for _, s := range secrets {
			assert.NotContains(t, body, strings.TrimPrefix(s, "whsec_"), path)
		}
	}
	e.as(e.tokB, "DELETE", hooksB+"/"+created.ID, "", http.StatusOK)
	e.as(e.tokB, "GET", hooksB+"/"+created.ID, "", http.StatusNotFound).vdkError(t)
	e.as(e.tokB, "DELETE", hooksB+"/"+created.ID, "", http.StatusNotFound).vdkError(t)
	assert.JSONEq(t, `[]`, string(e.as(e.tokB, "GET", hooksB, "", http.StatusOK).body))

	e.logs.mu.Lock()
	logs := e.logs.buf.String()
	e.logs.mu.Unlock()
	for _, s := range secrets {
		assert.NotContains(t, logs, strings.TrimPrefix(s, "whsec_"), "a secret in the logs")
	}
}

func sortedEvents() []string {
	out := append([]string(nil), job.WebhookEvents...)
	slices.Sort(out)
	return out
}

// createWebhook makes a webhook of team as the caller of e (auth mode none) and returns
// the answer, its secret included.
func (e *env) createWebhook(team string) webhook {
	e.t.Helper()
	r := e.do("POST", "/data-jobs/for-team/"+team+"/webhooks", `{"name":"ops","url":"https://hooks.example.com/datajobs"}`)
	require.Equal(e.t, http.StatusCreated, r.status, "%s", r.body)
	var w webhook
	r.json(e.t, &w)
	require.NotEmpty(e.t, w.Secret)
	return w
}

// storedSecret is the secret the dispatcher signs with for webhook id of team-b: the
// store's, opened with the key file.
func storedSecret(t *testing.T, e *hooksEnv, id string) []byte {
	t.Helper()
	return openedSecret(t, e.env, "team-b", id)
}

func openedSecret(t *testing.T, e *env, team, id string) []byte {
	t.Helper()
	hooks, err := e.store.TeamWebhooks(t.Context(), team)
	require.NoError(t, err)
	keys, err := secrets.LoadKeyring(e.keyFile)
	require.NoError(t, err)
	for _, h := range hooks {
		if h.ID == id {
			require.NotEmpty(t, h.SecretKeyID, "sealed with the key file")
			secret, err := notify.OpenWebhookSecret(keys, h)
			require.NoError(t, err)
			return secret
		}
	}
	t.Fatalf("webhook %s not in the store", id)
	return nil
}

// A team's webhooks are its own: another team's caller is refused (403) on the team's
// paths, finds nothing under its own with the webhook's id (404), lists none, and the
// webhook is as it was. Guards a webhook URL (a credential for Slack) or its secret
// readable, or its URL redirected, by another team.
func TestATeamsWebhooksAreVisibleAndEditableOnlyByThatTeam(t *testing.T) {
	t.Parallel()
	e := newHooksEnv(t)
	var hook webhook
	e.as(e.tokB, "POST", hooksB, `{"name":"hook-of-b","url":"https://hooks.example.com/b"}`, http.StatusCreated).json(t, &hook)
	before := string(e.as(e.tokB, "GET", hooksB+"/"+hook.ID, "", http.StatusOK).body)

	for _, rq := range []struct{ method, path, body string }{
		{"GET", hooksB, ""},
		{"POST", hooksB, `{"name":"planted","url":"https://evil.example.com/"}`},
		{"GET", hooksB + "/" + hook.ID, ""},
		{"PUT", hooksB + "/" + hook.ID, `{"url":"https://evil.example.com/","rotate_secret":true}`},
		{"DELETE", hooksB + "/" + hook.ID, ""},
	} {
		r := e.as(e.tokA, rq.method, rq.path, rq.body, http.StatusForbidden)
		assert.Contains(t, r.vdkError(t)["what"], "team-b")
		own := strings.Replace(rq.path, "team-b", "team-a", 1)
		r = e.do(rq.method, own, strings.Replace(rq.body, "planted", "own", 1), bearer(e.tokA)...)
		assert.NotContains(t, string(r.body), "hook-of-b", "%s %s", rq.method, own)
		if strings.Contains(own, hook.ID) {
			assert.Equal(t, http.StatusNotFound, r.status, "%s %s: %s", rq.method, own, r.body)
		}
	}
	assert.Equal(t, before, string(e.as(e.tokB, "GET", hooksB+"/"+hook.ID, "", http.StatusOK).body))
	var ofB []webhook
	e.as(e.tokB, "GET", hooksB, "", http.StatusOK).json(t, &ofB)
	assert.Len(t, ofB, 1, "nothing planted in team-b")
}

// Bad input is a 400 (or 404, 409) with a VDK error body naming the field, and changes
// nothing: a URL a webhook may not have (not http, or the installation's own network
// without --notification-webhook-allow-private), an unknown format or event, an unknown
// field (a secret of the caller's choosing), a name taken or over the team's limit.
func TestBadWebhookInputIsRefusedWithAVDKErrorBody(t *testing.T) {
	t.Parallel()
	e := newHooksEnv(t)
	var hook webhook
	e.as(e.tokB, "POST", hooksB, `{"name":"first","url":"https://hooks.example.com/1"}`, http.StatusCreated).json(t, &hook)
	one := hooksB + "/" + hook.ID
	for name, tc := range map[string]struct {
		method, path, body string
		status             int
		says               string
	}{
		"no name":              {"POST", hooksB, `{"url":"https://hooks.example.com/x"}`, 400, "name"},
		"an empty name":        {"PUT", one, `{"name":""}`, 400, "name"},
		"a name too long":      {"POST", hooksB, `{"name":"` + strings.Repeat("n", 101) + `","url":"https://hooks.example.com/x"}`, 400, "name"},
		"no url":               {"POST", hooksB, `{"name":"x"}`, 400, "url"},
		"an ftp url":           {"POST", hooksB, `{"name":"x","url":"ftp://hooks.example.com/x"}`, 400, "url"},
		"a relative url":       {"PUT", one, `{"url":"/hooks"}`, 400, "url"},
		"a loopback url":       {"POST", hooksB, `{"name":"x","url":"http://127.0.0.1:8093/metrics"}`, 400, "url"},
		"localhost":            {"PUT", one, `{"url":"http://localhost:8092/"}`, 400, "url"},
		"the metadata address": {"POST", hooksB, `{"name":"x","url":"http://169.254.169.254/latest/meta-data/"}`, 400, "url"},
		"a private address":    {"POST", hooksB, `{"name":"x","url":"http://10.0.0.7/hook"}`, 400, "url"},
		"an unknown format":    {"POST", hooksB, `{"name":"x","url":"https://hooks.example.com/x","format":"teams"}`, 400, "format"},
		"no events":            {"PUT", one, `{"events":[]}`, 400, "events"},
		"an unknown event":     {"POST", hooksB, `{"name":"x","url":"https://hooks.example.com/x","events":["job_deleted"]}`, 400, "events"},
		"a secret of our own":  {"POST", hooksB, `{"name":"x","url":"https://hooks.example.com/x","secret":"whsec_AAAA"}`, 400, "secret"},
		"not JSON":             {"POST", hooksB, `{"name":`, 400, "JSON"},
		"two values":           {"PUT", one, `{"name":"a"}{"name":"b"}`, 400, "JSON"},
		"a malformed id":       {"GET", hooksB + "/not-a-uuid", "", 404, "not-a-uuid"},
		"an unknown id":        {"PUT", hooksB + "/00000000-0000-0000-0000-000000000000", `{"name":"y"}`, 404, "00000000"},
		"a name the team has":  {"POST", hooksB, `{"name":"first","url":"https://hooks.example.com/2"}`, 409, "first"},
		"its own name again":   {"PUT", one, `{"name":"first"}`, 200, ""}, // no conflict with itself
	} {
		r := e.as(e.tokB, tc.method, tc.path, tc.body, tc.status)
		if tc.status == 200 {
			continue
		}
		body := r.vdkError(t)
		assert.Contains(t, body["what"]+body["why"], tc.says, "%s: %s", name, r.body)
	}
	var after webhook
	e.as(e.tokB, "GET", one, "", http.StatusOK).json(t, &after)
	hook.Secret = ""
	assert.Equal(t, hook, after, "nothing changed")

	for i := 2; i <= job.MaxTeamWebhooks; i++ {
		e.as(e.tokB, "POST", hooksB, fmt.Sprintf(`{"name":"hook-%d","url":"https://hooks.example.com/%d"}`, i, i), http.StatusCreated)
	}
	r := e.as(e.tokB, "POST", hooksB, `{"name":"one-too-many","url":"https://hooks.example.com/x"}`, http.StatusConflict)
	assert.Contains(t, r.vdkError(t)["what"], "20 webhooks")
	e.as(e.tokB, "PUT", one, `{"name":"hook-2"}`, http.StatusConflict).vdkError(t)
}

// With --notification-webhook-allow-private a receiver on the installation's own network
// (the tests', dev's) is accepted.
func TestAPrivateWebhookURLIsAcceptedWithTheFlag(t *testing.T) {
	t.Parallel()
	e := newHooksEnv(t, func(o *options) { o.webhookAllowPrivate = true })
	e.as(e.tokB, "POST", hooksB, `{"name":"local","url":"http://127.0.0.1:9999/hook"}`, http.StatusCreated)
}
