package notify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/datajobs/datajobs/internal/job"
)

// RateLimit bounds the messages one recipient receives from one team: at most Messages
// in any Window, and as many again for execution failures, which never wait behind
// successes or deployments. What comes faster waits and goes as one digest when the
// window allows another message, so a job failing every minute sends a few mails and
// digests, not 1,440 mails a day; a team's mails never spend another team's budget.
type RateLimit struct {
	// Messages is the most messages per team and recipient per Window, failures apart
	// (default 10).
	Messages int
	// Window is the period of the limit (default 1h).
	Window time.Duration
}

// message is one planned message: its events' deliveries to one recipient.
type message struct {
	channel, recipient string
	deliveries         []job.NotificationDelivery
}

// group is the message's group: its deliveries all have the same.
func (m message) group() group { return groupOf(m.deliveries[0]) }

// isFailure says whether e tells an execution's failure, whose messages go first and
// have a rate limit budget of their own.
func isFailure(e job.NotificationEvent) bool {
	return e.Kind == "execution_finished" && slices.Contains(failureStatuses(), statusOf(e))
}

// failureStatuses are the statuses of a failed execution.
func failureStatuses() []string {
	return []string{string(job.ExecUserError), string(job.ExecPlatformError)}
}

// id is the message's idempotency key: the same deliveries make the same key, so a
// message that a deposed leader sent but could not record is sent again under its key.
func (m message) id() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s", m.channel, m.recipient)
	for _, d := range m.deliveries {
		fmt.Fprintf(h, "\x00%d", d.EventID)
	}
	return "datajobs-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// planRecipient splits the due deliveries of one recipient (oldest first) into messages
// under the rate limit, given when the messages of the window were sent (oldest first):
// each its own while the budget lasts, the rest as one digest in the last message the
// budget allows, or, with no budget left, postponed until the oldest message of the
// window leaves it (the time returned; zero when nothing is postponed).
func planRecipient(channel, recipient string, due []job.NotificationDelivery, sent []time.Time, limit RateLimit) ([]message, time.Time) {
	one := func(ds ...job.NotificationDelivery) message {
		return message{channel: channel, recipient: recipient, deliveries: ds}
	}
	budget := limit.Messages - len(sent)
	if budget <= 0 {
		return nil, sent[len(sent)-limit.Messages].Add(limit.Window)
	}
	var out []message
	for i, d := range due {
		if len(out) == budget-1 && len(due)-i > 1 {
			return append(out, one(due[i:]...)), time.Time{}
		}
		out = append(out, one(d))
	}
	return out, time.Time{}
}

// plan groups the due deliveries into messages, per group (team, recipient and kind:
// failure or not), under the e-mail rate limit, and returns the deliveries it postpones
// (with their next attempt time and why).
func (d *Dispatcher) plan(ctx context.Context, due []job.NotificationDelivery, now time.Time) ([]message, []job.DeliveryOutcome, error) {
	var order []group
	groups := map[group][]job.NotificationDelivery{}
	var emails []string
	for _, dl := range due {
		g := groupOf(dl)
		if _, ok := groups[g]; !ok {
			order = append(order, g)
			if g.channel == ChannelEmail {
				emails = append(emails, g.recipient)
			}
		}
		groups[g] = append(groups[g], dl)
	}
	sent := map[group][]time.Time{}
	if len(emails) > 0 && d.cfg.RateLimit.Messages >= 0 {
		ms, err := d.db.MessagesSent(ctx, ChannelEmail, emails, now.Add(-d.cfg.RateLimit.Window), failureStatuses())
		if err != nil {
			return nil, nil, err
		}
		for _, m := range ms {
			g := group{channel: ChannelEmail, team: m.Team, recipient: m.Recipient, failure: m.Failure}
			sent[g] = append(sent[g], m.At)
		}
	}
	var (
		msgs      []message
		postponed []job.DeliveryOutcome
	)
	for _, g := range order {
		if g.channel != ChannelEmail || d.cfg.RateLimit.Messages < 0 {
			for _, dl := range groups[g] {
				msgs = append(msgs, message{channel: g.channel, recipient: g.recipient, deliveries: []job.NotificationDelivery{dl}})
			}
			continue
		}
		ms, until := planRecipient(g.channel, g.recipient, groups[g], sent[g], d.cfg.RateLimit)
		msgs = append(msgs, ms...)
		if until.IsZero() {
			continue
		}
		why := heldText(g, d.cfg.RateLimit, len(sent[g]), until)
		for _, dl := range groups[g] {
			postponed = append(postponed, job.DeliveryOutcome{
				NotificationTarget: dl.NotificationTarget,
				State:              job.DeliveryPending, Error: why, NextAttemptAt: until, At: now,
			})
		}
	}
	return msgs, postponed, nil
}

// heldText is a postponed delivery's last_error: why it waits and until when.
func heldText(g group, limit RateLimit, sent int, until time.Time) string {
	kind := "notifications other than execution failures"
	if g.failure {
		kind = "execution failures"
	}
	return fmt.Sprintf("held by the rate limit: %d messages of %s from team %s went to this recipient in the last %s (the limit is %d); it goes, as a digest with the others waiting, at %s",
		sent, kind, g.team, limit.Window, limit.Messages, until.UTC().Format(time.RFC3339))
}
