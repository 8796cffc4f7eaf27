package notify

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/datajobs/datajobs/internal/job"
)

// RateLimit bounds the messages one recipient receives: at most Messages in any Window.
// What comes faster waits and goes as one digest when the window allows another message,
// so a job failing every minute sends a few mails and digests, not 1,440 mails a day.
type RateLimit struct {
	// Messages is the most messages per recipient per Window (default 10).
	Messages int
	// Window is the period of the limit (default 1h).
	Window time.Duration
}

// message is one planned message: its events' deliveries to one recipient.
type message struct {
	channel, recipient string
	deliveries         []job.NotificationDelivery
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
