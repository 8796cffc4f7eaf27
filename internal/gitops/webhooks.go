package gitops

import (
	"context"
	"slices"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/notify/webhook"
)

// A team's notification webhooks in its file (issue 46 with issue 25's webhooks): planned,
// applied, owned and pruned as jobs, pipelines and triggers are. Their signing secrets are
// never in the file: the service makes one for a webhook the apply creates and shows it
// in the apply's answer, once, as the webhook POST does.

// Webhook is one of the team's notification webhooks: the body of its POST without a
// secret (the service makes it).
type Webhook struct {
	// Name names the webhook within the team.
	Name string `json:"name" jsonschema:"required"`
	// URL is the receiver's: http:// or https://, outside the installation's network.
	URL string `json:"url" jsonschema:"required"`
	// Format is "standard" (Standard Webhooks, the default) or "slack".
	Format string `json:"format,omitempty"`
	// Events are the webhook events it receives; absent: all of them.
	Events []string `json:"events,omitempty"`
}

// WebhookDefaults fills the fields of a webhook's create that are not given, as its POST
// does: the standard format and every event.
func WebhookDefaults(ch *job.TeamWebhookChange) {
	if ch.Format == nil {
		ch.Format = new(webhook.FormatStandard)
	}
	if ch.Events == nil {
		ch.Events = new(slices.Clone(job.WebhookEvents))
	}
}

// Create is the create of w as its POST reads it, the defaults filled in (WebhookDefaults):
// what the service validates.
func (w Webhook) Create() job.TeamWebhookChange {
	ch := job.TeamWebhookChange{Name: &w.Name, URL: &w.URL}
	if w.Format != "" {
		ch.Format = &w.Format
	}
	if w.Events != nil {
		ch.Events = &w.Events
	}
	WebhookDefaults(&ch)
	return ch
}

// webhookOf is the stored webhook w as the file holds it, defaults filled in: what a plan
// compares.
func webhookOf(w job.TeamWebhook) Webhook {
	return Webhook{Name: w.Name, URL: w.URL, Format: w.Format, Events: w.Events}
}

// planWebhooks plans the file's webhooks target (as their POST stores them) against the
// team's cur.
func planWebhooks(target []Webhook, cur []job.TeamWebhook, owner string) []Change {
	byName := map[string]*job.TeamWebhook{}
	for i := range cur {
		byName[cur[i].Name] = &cur[i]
	}
	out := make([]Change, 0, len(target))
	for i := range target {
		t := &target[i]
		c := Change{Kind: KindWebhook, Name: t.Name, hook: t, curHook: byName[t.Name], index: i}
		var curSpec any
		if c.curHook != nil {
			curSpec = webhookOf(*c.curHook)
		}
		// A webhook's spec is plain strings: it always encodes.
		c, _ = planSpec(c, t, curSpec, c.curHook != nil, owner, func() string { return c.curHook.ManagedBy })
		out = append(out, c)
	}
	return out
}

// applyWebhook creates, updates or deletes one webhook; a created one's id and secret go
// to c. An update keeps the webhook's id and secret.
func applyWebhook(ctx context.Context, w Writer, c *Change) error {
	switch c.Action {
	case ActionDelete:
		return w.DeleteWebhook(ctx, c.Name)
	case ActionUpdate:
		return w.UpdateWebhook(ctx, c.curHook.ID, *c.hook)
	}
	secret, err := webhook.GenerateSecret()
	if err != nil {
		return err
	}
	h, err := w.CreateWebhook(ctx, *c.hook, secret)
	if err != nil {
		return err
	}
	c.WebhookID, c.SigningSecret = h.ID, webhook.EncodeSecret(h.Secret)
	return nil
}

// exportWebhook is the stored webhook w as a file holds it: its defaults left out.
func exportWebhook(w job.TeamWebhook) Webhook {
	out := webhookOf(w)
	if out.Format == webhook.FormatStandard {
		out.Format = ""
	}
	if slices.Equal(out.Events, slices.Sorted(slices.Values(job.WebhookEvents))) {
		out.Events = nil
	}
	return out
}
