package ui_test

import (
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/notify/webhook"
	"github.com/datajobs/datajobs/internal/testenv"
)

// A person adds a team webhook in the console, sees its signing secret once (the one the
// dispatcher signs with), finds it listed without the secret afterwards, is told why a
// URL into the installation's network is refused, and deletes the webhook.
func TestATeamWebhookIsAddedWithItsSecretShownOnceAndDeleted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	b := e.browser(t)
	page := b.get("/ui/teams/team-b/webhooks")
	require.Equal(t, http.StatusOK, page.status, page.body)
	assert.Contains(t, page.body, "No webhooks")
	assert.Contains(t, b.get("/ui/teams/team-b/jobs/job-of-b").body, `href="/ui/teams/team-b/webhooks"`, "the job page leads to it")
	token := testenv.CSRFToken(t, page.body)

	r := b.do(http.MethodPost, "/ui/teams/team-b/webhooks", url.Values{
		"csrf": {token}, "name": {"on-call"},
		"url": {"https://hooks.example.com/b"}, "format": {"slack"}, "events": {"deploy_failed", "execution_user_error"},
	})
	require.Equal(t, http.StatusOK, r.status, r.body)
	hooks, err := e.store.TeamWebhooks(t.Context(), "team-b")
	require.NoError(t, err)
	require.Len(t, hooks, 1)
	secret := webhook.EncodeSecret(hooks[0].Secret)
	assert.Contains(t, html.UnescapeString(r.body), secret, "the new secret is shown")
	assert.Equal(t, "no-store", r.header.Get("Cache-Control"))
	assert.Equal(t, "slack", hooks[0].Format)
	assert.Equal(t, []string{"deploy_failed", "execution_user_error"}, hooks[0].Events)

	page = b.get("/ui/teams/team-b/webhooks")
	assert.Contains(t, page.body, "on-call")
	assert.Contains(t, page.body, "https://hooks.example.com/b")
	assert.NotContains(t, html.UnescapeString(page.body), strings.TrimPrefix(secret, "whsec_"), "shown once only")

	r = b.do(http.MethodPost, "/ui/teams/team-b/webhooks", url.Values{
		"csrf": {token}, "name": {"metadata"},
		"url": {"http://169.254.169.254/latest/meta-data/"}, "events": {"deploy_failed"},
	})
	assert.Equal(t, http.StatusBadRequest, r.status)
	assert.Contains(t, r.body, "loopback, link-local or private address")

	r = b.do(http.MethodPost, "/ui/teams/team-b/webhooks/"+hooks[0].ID+"/delete", url.Values{"csrf": {token}}, "HX-Request", "true")
	require.Equal(t, http.StatusOK, r.status, r.body)
	assert.Equal(t, "/ui/teams/team-b/webhooks", r.header.Get("HX-Redirect"))
	hooks, err = e.store.TeamWebhooks(t.Context(), "team-b")
	require.NoError(t, err)
	assert.Empty(t, hooks)
}
