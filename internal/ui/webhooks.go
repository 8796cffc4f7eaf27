package ui

import (
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/notify/webhook"
)

// A team's notification webhooks: list, add, delete (docs/webhooks.md). The page that
// answers an add shows the new secret, once; no other page has it.

// webhooksData is the team webhooks page.
type webhooksData struct {
	Team, Href, CSRF string
	Hooks            []job.TeamWebhook
	Events           []string
	// Added is the webhook just created, with its secret (as whsec_…); nil otherwise.
	Added  *job.TeamWebhook
	Secret string
}

func webhooksURL(team string) string { return Prefix + "teams/" + url.PathEscape(team) + "/webhooks" }

// webhooksPage is GET /ui/teams/{team}/webhooks.
func (c *Console) webhooksPage(w http.ResponseWriter, r *http.Request, s session) error {
	return c.showWebhooks(w, r, s, nil)
}

func (c *Console) showWebhooks(w http.ResponseWriter, r *http.Request, s session, added *job.TeamWebhook) error {
	team := r.PathValue("team")
	hooks, err := c.svc.TeamWebhooks(r.Context(), team)
	if err != nil {
		return err
	}
	d := webhooksData{Team: team, Href: webhooksURL(team), CSRF: s.CSRF, Hooks: hooks, Events: job.WebhookEvents, Added: added}
	if added != nil {
		d.Secret = webhook.EncodeSecret(added.Secret)
	}
	c.renderPage(w, r, http.StatusOK, "webhooks", page{Title: "Webhooks of " + team, Session: s, Nav: "jobs", Body: d})
	return nil
}

// addWebhook is POST /ui/teams/{team}/webhooks: the REST create, answered with the page
// and the new secret on it.
func (c *Console) addWebhook(w http.ResponseWriter, r *http.Request, s session) error {
	if err := r.ParseForm(); err != nil {
		return job.Invalid("form", "a form of name, url, format and events", "unreadable")
	}
	name, hookURL, format := strings.TrimSpace(r.PostForm.Get("name")), strings.TrimSpace(r.PostForm.Get("url")), r.PostForm.Get("format")
	events := slices.DeleteFunc(slices.Clone(r.PostForm["events"]), func(e string) bool { return e == "" })
	ch := job.TeamWebhookChange{Name: &name, URL: &hookURL, Events: &events}
	if format != "" {
		ch.Format = &format
	}
	added, err := c.svc.CreateTeamWebhook(r.Context(), r.PathValue("team"), s.User, ch)
	if err != nil {
		return err
	}
	return c.showWebhooks(w, r, s, &added)
}

// deleteWebhook is POST /ui/teams/{team}/webhooks/{id}/delete.
func (c *Console) deleteWebhook(w http.ResponseWriter, r *http.Request, _ session) error {
	team := r.PathValue("team")
	if err := c.svc.DeleteTeamWebhook(r.Context(), team, r.PathValue("id")); err != nil {
		return err
	}
	if isFragment(r) {
		w.Header().Set("HX-Redirect", webhooksURL(team))
		return nil
	}
	http.Redirect(w, r, webhooksURL(team), http.StatusSeeOther)
	return nil
}
