package maintenance

import "github.com/datajobs/datajobs/internal/notify"

// Dispatch is the notification dispatcher (internal/notify, which keeps the outbox's
// delivery: plan, send, record, upkeep) as a service: a pass at the start of the term,
// then every notify.Config.Interval.
func Dispatch(d *notify.Dispatcher) Service {
	return Service{Name: "notification_dispatch", Period: d.Period(), AtStart: true, RunOnce: d.RunOnce}
}
