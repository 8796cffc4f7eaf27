// Package notify delivers the notifications outbox (docs/notifications.md): a dispatcher,
// run by the leader's maintenance (internal/maintenance/dispatch.go), expands each event
// into one delivery per recipient, hands each to its channel (e-mail, webhooks) with an
// idempotency key, retries failures with exponential backoff up to a maximum age, stops
// at permanent refusals, and turns a recipient's flood into a digest. Every write is
// fenced by the leader's term.
//
// Sending is continuous, not a pass: Dispatcher.Start starts the term's lanes (lanes.go:
// e-mail's workers apart from the webhooks', a share per team and one message in flight
// per recipient, failures first), and the maintainer that called it waits for them when
// the term ends. Each RunOnce, every Period, plans what is due and feeds the lanes
// without waiting for a send; without Start (tests, a one-shot) RunOnce sends through
// lanes of its own and returns when they are done.
package notify

import (
	"context"
	"errors"
	"time"

	"github.com/datajobs/datajobs/internal/job"
)

// The channels the dispatcher knows.
const (
	ChannelEmail   = "email"
	ChannelWebhook = "webhook"
)

// Channel is a transport: it delivers one message to one recipient, or says why not.
type Channel interface {
	// Deliver hands d to the transport. It returns nil once the transport accepted it
	// (the SMTP server queued it, the webhook answered 2xx), an error marked Permanent
	// when retrying cannot help (the recipient does not exist), else a retryable error.
	// Delivering the same d.ID twice must show its recipient one message (the e-mail's
	// Message-ID, the webhook-id).
	Deliver(ctx context.Context, d Delivery) error
}

// Delivery is one message to one recipient: one event, or a digest of several.
type Delivery struct {
	// ID is the idempotency key: the same for every attempt of the same message.
	ID                 string
	Channel, Recipient string
	// Subject and Text are the message for people (rendered by the dispatcher).
	Subject, Text string
	// Events are what it tells: one, or more for a digest.
	Events []job.NotificationEvent
}

// Digest says whether the delivery carries more than one event.
func (d Delivery) Digest() bool { return len(d.Events) > 1 }

// permanent marks an error that retrying cannot fix; recipient says the recipient itself
// was refused (its server does not take it), which suppresses it (Config.SuppressFor).
type permanent struct {
	err       error
	recipient bool
}

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent marks err as permanent: the delivery is not retried.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanent{err: err}
}

// RecipientRefused marks err as the recipient's server refusing it for good (an SMTP 5xx
// to RCPT TO): the delivery is not retried, and the recipient is sent nothing more for
// Config.SuppressFor, each delivery to it meanwhile marked suppressed.
func RecipientRefused(err error) error {
	if err == nil {
		return nil
	}
	return permanent{err: err, recipient: true}
}

// isRecipientRefused says whether err, or an error it wraps, was marked RecipientRefused.
func isRecipientRefused(err error) bool {
	var p permanent
	return errors.As(err, &p) && p.recipient
}

// IsPermanent says whether err, or an error it wraps, was marked Permanent.
func IsPermanent(err error) bool {
	var p permanent
	return errors.As(err, &p)
}

// later marks an error with the wait the transport asked for before the next attempt.
type later struct {
	err   error
	after time.Duration
}

func (l later) Error() string { return l.err.Error() }
func (l later) Unwrap() error { return l.err }

// RetryAfter marks err with the wait the transport asked for (a webhook's Retry-After on
// 429 or 503): the dispatcher tries again no sooner than after, instead of its own
// backoff, and no later than the event's maximum age. A wait of 0 leaves err as it is.
func RetryAfter(err error, after time.Duration) error {
	if err == nil || after <= 0 {
		return err
	}
	return later{err, after}
}

// retryAfterOf is the wait err was marked with, 0 if none.
func retryAfterOf(err error) time.Duration {
	var l later
	if errors.As(err, &l) {
		return l.after
	}
	return 0
}
