package maintenance

import "github.com/datajobs/datajobs/internal/notify"

// Dispatch is the notification dispatcher (internal/notify, which keeps the outbox's
// delivery: plan, send, record, upkeep) as a service: its lanes start with the term and
// send continuously, and a run at the start of the term, then every
// notify.Config.Interval, plans what is due and feeds them without waiting for a send.
func Dispatch(d *notify.Dispatcher) Service {
	return Service{Name: "notification_dispatch", Period: d.Period(), AtStart: true, Start: d.Start, RunOnce: d.RunOnce}
}
