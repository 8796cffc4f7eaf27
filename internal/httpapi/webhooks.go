package httpapi

import (
	"net/http"
	"net/url"
	"time"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/notify/webhook"
)

// A team's notification webhooks (issue 25, docs/api.md "Webhooks"): datajobs' own
// endpoints, beside VDK's. The signing secret is answered only by the create and by a PUT
// that rotates it, never by a read.

// webhookRoutes registers the webhook endpoints under team (the for-team path).
func (a *api) webhookRoutes(rt *router, team string) {
	rt.collection(team+"/webhooks", team+"/webhooks/{webhook_id}", memberOfTeam, collection{
		list: a.listWebhooks, create: a.createWebhook, get: a.getWebhook, put: a.updateWebhook, del: a.deleteWebhook,
	})
}

// webhookRequest is a create or a change; an absent (or null) field is not given.
type webhookRequest struct {
	Name         *string   `json:"name"`
	URL          *string   `json:"url"`
	Format       *string   `json:"format"`
	Events       *[]string `json:"events"`
	RotateSecret bool      `json:"rotate_secret"`
}

type webhookResponse struct {
	ID        string    `json:"id"`
	Team      string    `json:"team"`
	Name      string    `json:"name"`
	URL       string    `json:"url"`
	Format    string    `json:"format"`
	Events    []string  `json:"events"`
	CreatedBy string    `json:"created_by"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedBy string    `json:"updated_by"`
	UpdatedAt time.Time `json:"updated_at"`
	// Secret is "whsec_<base64>", only in the answer that made it.
	Secret string `json:"secret,omitempty"`
}

func toWebhookResponse(w job.TeamWebhook) webhookResponse {
	out := webhookResponse{
		ID: w.ID, Team: w.Team, Name: w.Name, URL: w.URL, Format: w.Format, Events: w.Events,
		CreatedBy: w.CreatedBy, CreatedAt: w.CreatedAt, UpdatedBy: w.UpdatedBy, UpdatedAt: w.UpdatedAt,
	}
	if len(w.Secret) > 0 {
		out.Secret = webhook.EncodeSecret(w.Secret)
	}
	return out
}

// decodeWebhook reads a webhook request strictly: an unknown field (a "secret" of the
// caller's choosing, a misspelt "event") is a 400, not silently dropped.
func (a *api) decodeWebhook(w http.ResponseWriter, r *http.Request) (job.TeamWebhookChange, error) {
	req, err := decodeStrictBody[webhookRequest](a, w, r)
	if err != nil {
		return job.TeamWebhookChange{}, err
	}
	return job.TeamWebhookChange{Name: req.Name, URL: req.URL, Format: req.Format, Events: req.Events, RotateSecret: req.RotateSecret}, nil
}

// writeWebhook answers one webhook; an answer with a secret is not to be cached.
func writeWebhook(w http.ResponseWriter, status int, hook job.TeamWebhook) {
	if len(hook.Secret) > 0 {
		w.Header().Set("Cache-Control", "no-store")
	}
	writeJSON(w, status, toWebhookResponse(hook))
}

// listWebhooks is GET .../webhooks: 200 with the team's webhooks, by name.
func (a *api) listWebhooks(w http.ResponseWriter, r *http.Request) error {
	hooks, err := a.svc.TeamWebhooks(r.Context(), r.PathValue("team"))
	return replyList(w, http.StatusOK, hooks, err, toWebhookResponse)
}

// createWebhook is POST .../webhooks: 201 with the webhook, its secret and its Location.
func (a *api) createWebhook(w http.ResponseWriter, r *http.Request) error {
	ch, err := a.decodeWebhook(w, r)
	if err != nil {
		return err
	}
	team := r.PathValue("team")
	hook, err := a.svc.CreateTeamWebhook(r.Context(), team, a.user(r, ""), ch)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/data-jobs/for-team/"+url.PathEscape(team)+"/webhooks/"+hook.ID)
	writeWebhook(w, http.StatusCreated, hook)
	return nil
}

// getWebhook is GET .../webhooks/{webhook_id}: 200, without the secret.
func (a *api) getWebhook(w http.ResponseWriter, r *http.Request) error {
	hook, err := a.svc.TeamWebhook(r.Context(), r.PathValue("team"), r.PathValue("webhook_id"))
	if err != nil {
		return err
	}
	writeWebhook(w, http.StatusOK, hook)
	return nil
}

// updateWebhook is PUT .../webhooks/{webhook_id}: the given fields change, the others
// stay; "rotate_secret": true answers the new secret. 200 with the webhook.
func (a *api) updateWebhook(w http.ResponseWriter, r *http.Request) error {
	ch, err := a.decodeWebhook(w, r)
	if err != nil {
		return err
	}
	hook, err := a.svc.UpdateTeamWebhook(r.Context(), r.PathValue("team"), r.PathValue("webhook_id"), a.user(r, ""), ch)
	if err != nil {
		return err
	}
	writeWebhook(w, http.StatusOK, hook)
	return nil
}

// deleteWebhook is DELETE .../webhooks/{webhook_id}: 200.
func (a *api) deleteWebhook(w http.ResponseWriter, r *http.Request) error {
	err := a.svc.DeleteTeamWebhook(r.Context(), r.PathValue("team"), r.PathValue("webhook_id"))
	return replyStatus(w, http.StatusOK, err)
}
