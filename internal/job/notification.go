package job

import (
	"encoding/json"
	"time"
)

// NotificationEvent is one event of the notifications outbox: what happened (Kind, with
// its details in Payload), to which job, and the contacts it goes to.
type NotificationEvent struct {
	ID int64
	// Key names the event's cause; one cause is one event.
	Key, Kind, JobName, Team string
	// Recipients are the job's contacts for this kind of event when it happened.
	Recipients []string
	Payload    json.RawMessage
	CreatedAt  time.Time
}

// Delivery states of a notification to one recipient.
const (
	DeliveryPending   = "pending"   // not yet accepted by the transport; retried
	DeliveryDelivered = "delivered" // accepted by the transport (the SMTP server, the webhook)
	DeliveryFailed    = "failed"    // retried until the maximum age, never accepted
	DeliveryBounced   = "bounced"   // refused permanently by the transport; not retried
	// DeliverySuppressed: not attempted, its recipient bounced before and is suppressed
	// (Suppression); not retried.
	DeliverySuppressed = "suppressed"
)

// Suppression is a recipient the dispatcher sends nothing to: its server refused it
// permanently (an SMTP 5xx to RCPT TO) on the delivery of event EventID.
type Suppression struct {
	Channel, Recipient, Reason string
	EventID                    int64
	// At is when it bounced; Until when the suppression ends (nil: when it is removed).
	At    time.Time
	Until *time.Time
}

// NotificationTarget is one recipient of an event on one channel.
type NotificationTarget struct {
	EventID            int64
	Channel, Recipient string
}

// NotificationDelivery is the delivery of one event to one target.
type NotificationDelivery struct {
	NotificationTarget
	Event         NotificationEvent
	State         string
	Attempts      int
	NextAttemptAt time.Time
	LastError     string
	// MessageID is the message that carried it: its own, or a digest's.
	MessageID   string
	DeliveredAt *time.Time
}

// DeliveryOutcome is what one attempt (or a postponement) made of a delivery.
type DeliveryOutcome struct {
	NotificationTarget
	State, MessageID, Error string
	// Attempted counts the attempt (false: postponed by the rate limit, not tried).
	Attempted     bool
	NextAttemptAt time.Time
	// At is when the attempt ended (the dispatcher's clock): the delivery time of a
	// delivered one, which the rate limit's window counts.
	At time.Time
}

// MessageSent is one message accepted by its transport, as the rate limit counts it.
type MessageSent struct {
	Team, Recipient string
	// Failure: it told an execution's failure (failures have a budget of their own).
	Failure bool
	At      time.Time
}

// OutboxStats are the outbox's gauges.
type OutboxStats struct {
	// Pending is the number of deliveries not yet accepted, plus the events not yet
	// expanded into deliveries.
	Pending int
	// OldestPending is when the oldest of them was recorded (zero when none is).
	OldestPending time.Time
}
