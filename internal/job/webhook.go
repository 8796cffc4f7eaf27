package job

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// TeamWebhook is a team's notification webhook (issue 25): where the team's events go,
// in which format, and which of them. Secret is its HMAC key: read by the dispatcher and
// shown to a person once, when it is made; the API never answers it otherwise.
type TeamWebhook struct {
	ID, Team, Name, URL string
	// Format is "standard" (Standard Webhooks) or "slack".
	Format string
	// Events are the webhook events it receives (WebhookEvents), sorted.
	Events []string
	// Secret is the HMAC key as stored: sealed by the secrets key ring (SecretKeyID names
	// the key that wraps its data key SecretWrappedKey), or, with SecretKeyID "" (no key
	// ring configured when it was written), the key itself. The service and the
	// dispatcher open it (notify.OpenWebhookSecret); the API answers it only once, open.
	Secret               []byte
	SecretKeyID          string
	SecretWrappedKey     []byte
	CreatedBy, UpdatedBy string
	CreatedAt, UpdatedAt time.Time
	// ManagedBy is the jobs-as-code file that owns the webhook ("": none): the API
	// refuses other changes of it (CheckOwner).
	ManagedBy string
}

// WebhookEvents are the events a team webhook can receive: the outbox's event kinds,
// with execution_finished split by the execution's status and pipeline_run_finished by
// the run's.
var WebhookEvents = []string{
	"deploy_succeeded", "deploy_failed",
	"execution_succeeded", "execution_user_error", "execution_platform_error", "execution_cancelled",
	"job_late", "job_recovered",
	"pipeline_run_succeeded", "pipeline_run_failed", "pipeline_run_cancelled",
}

// WebhookEventOf is the webhook event of an outbox event of kind (and, for
// execution_finished and pipeline_run_finished, the execution's or the run's status).
func WebhookEventOf(kind, status string) string {
	switch kind {
	case "execution_finished":
		return "execution_" + status
	case "pipeline_run_finished":
		return "pipeline_run_" + status
	}
	return kind
}

// Wants reports whether the webhook receives an outbox event of kind (and status).
func (w TeamWebhook) Wants(kind, status string) bool {
	return slices.Contains(w.Events, WebhookEventOf(kind, status))
}

// MaxTeamWebhooks bounds a team's webhooks: every event of the team is sent to each.
const MaxTeamWebhooks = 20

// TeamWebhookChange is what a create or an update asks for; a nil field is not given
// (an update keeps it, a create takes its default). RotateSecret makes a new secret.
type TeamWebhookChange struct {
	Name, URL, Format *string
	Events            *[]string
	RotateSecret      bool
}

// ValidateWebhookEvents checks and sorts a webhook's events: known ones, at least one.
func ValidateWebhookEvents(events []string) ([]string, error) {
	known := "a non-empty list of " + strings.Join(WebhookEvents, ", ")
	if len(events) == 0 {
		return nil, Invalid("events", known, "[]")
	}
	out := slices.Clone(events)
	for _, e := range out {
		if !slices.Contains(WebhookEvents, e) {
			return nil, Invalid("events", known, quote(e))
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// WebhookNotFound reports a webhook id that the team does not have (another team's
// included: it is not told apart).
func WebhookNotFound(team, id string) *Error {
	return NewError(KindNotFound, fmt.Sprintf("The webhook %q was not found for team %q.", id, team),
		"The team has no webhook with that id.",
		notProcessed, "List the team's webhooks (GET .../webhooks) for their ids.")
}

// WebhookNameTaken reports a create or rename to a name another of the team's webhooks has.
func WebhookNameTaken(team, name string) *Error {
	return NewError(KindConflict, fmt.Sprintf("Team %q already has a webhook named %q.", team, name),
		"A team's webhook names are unique.",
		"The webhook was not saved.", "Choose another name, or change or delete the existing webhook.")
}

// TeamWebhooksQuota reports a create past MaxTeamWebhooks.
func TeamWebhooksQuota(team string) *Error {
	return NewError(KindConflict, fmt.Sprintf("Team %q has %d webhooks, the most a team may have.", team, MaxTeamWebhooks),
		"Every event of a team is sent to each of its webhooks.",
		"The webhook was not created.", "Delete a webhook the team no longer uses, or send several events to one receiver.")
}

// webhookIDPattern is the form of a webhook id: a UUID, as PostgreSQL writes it.
var webhookIDPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// ValidWebhookID reports whether id has the form of a webhook id.
func ValidWebhookID(id string) bool { return webhookIDPattern.MatchString(id) }
