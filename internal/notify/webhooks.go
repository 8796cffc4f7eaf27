package notify

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/notify/webhook"
	"github.com/datajobs/datajobs/internal/secrets"
)

// The webhook channel's recipients: a team webhook by id, or the platform-wide one.
const (
	teamWebhookPrefix = "team-webhook:"
	platformWebhook   = "platform"
)

// WebhookStore reads a team's webhooks (internal/store).
type WebhookStore interface {
	TeamWebhooks(ctx context.Context, team string) ([]job.TeamWebhook, error)
}

// Webhooks is the webhook channel: every event goes to each of its team's webhooks that
// wants it, and to the platform-wide webhook when one is configured.
type Webhooks struct {
	Sender *webhook.Sender
	Store  WebhookStore
	// Platform is the platform-wide webhook (--notification-webhook-url); URL "" for none.
	Platform webhook.Endpoint
	// Keys opens the team webhooks' sealed secrets (--secrets-key-file); nil: only
	// secrets stored open can be read.
	Keys *secrets.Keyring
}

// OpenWebhookSecret returns the HMAC key of h, opened with keys when it is sealed (a
// secret stored open, key id "", is returned as it is).
func OpenWebhookSecret(keys *secrets.Keyring, h job.TeamWebhook) ([]byte, error) {
	if h.SecretKeyID == "" {
		return h.Secret, nil
	}
	if keys == nil {
		return nil, fmt.Errorf("webhook %s: its secret is sealed under key %s and no --secrets-key-file is configured", h.Name, h.SecretKeyID)
	}
	secret, err := keys.Open(secrets.WebhookOwner(h.ID), secrets.Envelope{KeyID: h.SecretKeyID, WrappedKey: h.SecretWrappedKey, Sealed: h.Secret})
	if err != nil {
		return nil, fmt.Errorf("webhook %s: %w", h.Name, err)
	}
	return secret, nil
}

// ParseSecret reads a Standard Webhooks secret, "whsec_<base64>" (the prefix optional).
func ParseSecret(s string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(strings.TrimSpace(s), "whsec_"))
	if err != nil {
		return nil, fmt.Errorf("webhook secret: %w", err)
	}
	return key, nil
}

// Targets are the webhook recipients of events (Config.Targets): each team's webhooks are
// read once for the batch, not once per event.
func (w *Webhooks) Targets(ctx context.Context, events []job.NotificationEvent) ([]job.NotificationTarget, error) {
	var out []job.NotificationTarget
	hooks := map[string][]job.TeamWebhook{}
	for _, e := range events {
		if w.Platform.URL != "" {
			out = append(out, job.NotificationTarget{EventID: e.ID, Channel: ChannelWebhook, Recipient: platformWebhook})
		}
		hs, ok := hooks[e.Team]
		if !ok {
			var err error
			if hs, err = w.Store.TeamWebhooks(ctx, e.Team); err != nil {
				return nil, err
			}
			hooks[e.Team] = hs
		}
		status := statusOf(e)
		for _, h := range hs {
			if h.Wants(e.Kind, status) {
				out = append(out, job.NotificationTarget{EventID: e.ID, Channel: ChannelWebhook, Recipient: teamWebhookPrefix + h.ID})
			}
		}
	}
	return out, nil
}

// Deliver sends d (one event: the rate limit and its digests are e-mail's) to its webhook.
// A team webhook deleted since the event is a permanent failure.
func (w *Webhooks) Deliver(ctx context.Context, d Delivery) error {
	e := d.Events[0]
	endpoint, err := w.endpoint(ctx, e.Team, d.Recipient)
	if err != nil {
		return err
	}
	data, err := webhookData(e)
	if err != nil {
		return Permanent(err)
	}
	err = w.Sender.Send(ctx, endpoint, webhook.Message{
		ID: d.ID, Type: job.WebhookEventOf(e.Kind, statusOf(e)), Timestamp: e.CreatedAt, Payload: data, Text: d.Subject + "\n\n" + d.Text,
	})
	if webhook.IsPermanent(err) {
		return Permanent(err)
	}
	return RetryAfter(err, webhook.RetryAfter(err))
}

func (w *Webhooks) endpoint(ctx context.Context, team, recipient string) (webhook.Endpoint, error) {
	if recipient == platformWebhook {
		return w.Platform, nil
	}
	id := strings.TrimPrefix(recipient, teamWebhookPrefix)
	hooks, err := w.Store.TeamWebhooks(ctx, team)
	if err != nil {
		return webhook.Endpoint{}, err
	}
	for _, h := range hooks {
		if h.ID == id {
			secret, err := OpenWebhookSecret(w.Keys, h)
			if err != nil { // retried: the key file may be restored, or a replica have it
				return webhook.Endpoint{}, err
			}
			return webhook.Endpoint{URL: h.URL, Secret: secret, Format: h.Format}, nil
		}
	}
	return webhook.Endpoint{}, Permanent(fmt.Errorf("webhook %s of team %s was deleted", id, team))
}

// statusOf is the status in an event's payload ("" when it has none).
func statusOf(e job.NotificationEvent) string {
	var p struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(e.Payload, &p)
	return p.Status
}

// webhookData is the body's data: the event's payload with its job (but for a pipeline's
// event), team and kind.
func webhookData(e job.NotificationEvent) (json.RawMessage, error) {
	data := map[string]any{}
	if err := json.Unmarshal(e.Payload, &data); err != nil {
		return nil, fmt.Errorf("event %d payload: %w", e.ID, err)
	}
	data["team"], data["event"] = e.Team, e.Kind
	if e.Kind != pipelineRunFinished { // a pipeline's event names its pipeline (payload's "pipeline")
		data["job_name"] = e.JobName
	}
	return json.Marshal(data)
}
