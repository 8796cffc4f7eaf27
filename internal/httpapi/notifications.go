package httpapi

import (
	"encoding/json"
	"net/http"
	"time"
)

// notificationResponse is one event of GET …/jobs/{job}/notifications: what happened,
// when, and what became of it for each recipient.
type notificationResponse struct {
	ID         int64              `json:"id"`
	Event      string             `json:"event"`
	CreatedAt  time.Time          `json:"created_at"`
	Details    json.RawMessage    `json:"details"`
	Recipients []string           `json:"recipients"`
	Deliveries []deliveryResponse `json:"deliveries"`
}

// deliveryResponse is one recipient's delivery: pending (retried), delivered, failed
// (given up at --notification-max-age), bounced (refused permanently) or suppressed (not
// sent: the recipient bounced before).
type deliveryResponse struct {
	Channel     string     `json:"channel"`
	Recipient   string     `json:"recipient"`
	State       string     `json:"state"`
	Attempts    int        `json:"attempts"`
	LastError   string     `json:"last_error,omitempty"`
	NextAttempt *time.Time `json:"next_attempt_at,omitempty"`
	DeliveredAt *time.Time `json:"delivered_at,omitempty"`
}

// listNotifications answers the job's last notification events, newest first.
func (a *api) listNotifications(w http.ResponseWriter, r *http.Request) error {
	team, name := jobOf(r)
	events, deliveries, err := a.svc.JobNotifications(r.Context(), team, name)
	if err != nil {
		return err
	}
	out := make([]notificationResponse, 0, len(events))
	for _, e := range events {
		n := notificationResponse{
			ID: e.ID, Event: e.Kind, CreatedAt: e.CreatedAt, Details: e.Payload,
			Recipients: append([]string{}, e.Recipients...), Deliveries: []deliveryResponse{},
		}
		for _, d := range deliveries[e.ID] {
			dr := deliveryResponse{
				Channel: d.Channel, Recipient: d.Recipient, State: d.State, Attempts: d.Attempts,
				LastError: d.LastError, DeliveredAt: d.DeliveredAt,
			}
			if d.State == "pending" {
				next := d.NextAttemptAt
				dr.NextAttempt = &next
			}
			n.Deliveries = append(n.Deliveries, dr)
		}
		out = append(out, n)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
