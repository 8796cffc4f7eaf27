// Package firer is the leader's trigger controller (issue 42): a reconciler keyed by
// trigger id on the shared loop (controller.Run), which turns a trigger's oldest pending
// events into runs in one fenced transaction per reconcile (store.FireTrigger: the events
// and the runs they start are written together, so each event starts at most one run
// through any number of leader changes, and a deposed leader starts nothing). A firing
// starts a bounded number of runs; a trigger with more events pending is queued again at
// once, behind the triggers already queued, so a busy trigger's events start in small
// transactions, in order, and other triggers take their turns. It is woken by the
// NOTIFY that an invocation's transaction sends, and by the one the statement recording an
// upstream's final status sends (migration 0050); a window's close and a busy target are
// requeued after their time. Its resync, a key of the same queue planned every Interval
// and once the term listens (controller.Keyed, the pipeline stepper's shape), queues every
// trigger with pending events as the safety net (a NOTIFY may have been lost) and deletes
// the events past their retention.
package firer

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/trigger"
)

// Defaults of Config.
const (
	// WorkersDefault is how many triggers are fired at once. A firing mostly waits on
	// the database; with 4, 100 events a second on 10 triggers kept them all busy on a
	// loaded machine, the firer's queue waiting about as long as a firing (bench/triggers).
	// Each firing holds a connection of the pool for its transaction.
	WorkersDefault = 8
	// IntervalDefault is the period of the resync, the safety-net pass.
	IntervalDefault = 5 * time.Second
	// BusyRetryDefault is when a trigger whose target was busy is tried again (a run's
	// end wakes nothing here).
	BusyRetryDefault = 2 * time.Second
)

// Config configures the firer.
type Config struct {
	// Settings are its loop's (defaults WorkersDefault triggers fired at once, a resync
	// every IntervalDefault); the Logger receives the firings that start something.
	controller.Settings
	// Registerer, when set, registers the queue's metrics (datajobs_trigger_queue_*,
	// datajobs_trigger_panics_total).
	Registerer prometheus.Registerer
	// BusyRetry is when a trigger whose target was busy is tried again (default
	// BusyRetryDefault).
	BusyRetry time.Duration
	// Metrics counts the events started, coalesced and skipped (nil: none).
	Metrics *trigger.Metrics
}

// Store is what the firer reads and writes (store.Store implements it).
type Store interface {
	controller.Listener
	PendingTriggers(ctx context.Context) ([]string, error)
	FireTrigger(ctx context.Context, fence job.Fence, id string, now time.Time) (store.TriggerFiring, error)
	DeleteExpiredTriggerEvents(ctx context.Context, fence job.Fence) (int, error)
}

// Firer fires triggers on the leader. Its Run (controller.Keyed) fires them until ctx
// ends, as the leader of a term: the term's queue of trigger ids and its workers, the
// LISTEN that feeds it (a payload is a trigger id), and the resync once it listens and
// every Interval; on return every goroutine it started has stopped.
type Firer struct {
	*controller.Keyed
	cfg Config
	db  Store
}

// New returns a firer of db's triggers.
func New(cfg Config, db Store) *Firer {
	cfg.BusyRetry = cmp.Or(cfg.BusyRetry, BusyRetryDefault)
	cfg.Settings = cfg.WithDefaults(WorkersDefault, IntervalDefault)
	f := &Firer{cfg: cfg, db: db}
	f.Keyed = controller.NewKeyed(cfg.Settings, controller.KeyedConfig{
		Registerer: cfg.Registerer, Channel: store.TriggerEventsChannel, Name: "trigger", Subject: "trigger_fire", Items: "Trigger ids", KeyName: "trigger",
	}, db, f.reconcile)
	return f
}

// reconcile handles one key of term t: a firing of the trigger it names, or the resync.
func (f *Firer) reconcile(ctx context.Context, t controller.Term, key string) (controller.Result, error) {
	fence := job.Fence{Epoch: t.Epoch}
	if key == controller.ResyncKey {
		return controller.Result{}, f.resync(ctx, fence, t.Queue)
	}
	return f.fire(ctx, fence, t.Queue, key)
}

// fire turns the oldest pending events of the trigger id into runs; with more left, it
// queues the trigger again at once (the queue hands it out again once this reconcile is
// done, behind the triggers already queued).
func (f *Firer) fire(ctx context.Context, fence job.Fence, queue *controller.Queue, id string) (controller.Result, error) {
	now := f.cfg.Now()
	res, err := f.db.FireTrigger(ctx, fence, id, now)
	if err != nil {
		return controller.Result{}, fmt.Errorf("fire trigger %s: %w", id, err)
	}
	f.cfg.Metrics.Add(res.Kind, trigger.StartedOut, len(res.Started))
	f.cfg.Metrics.Add(res.Kind, trigger.CoalescedOut, res.Coalesced)
	f.cfg.Metrics.Add(res.Kind, trigger.SkippedOut, res.Skipped)
	if len(res.Started) > 0 {
		f.cfg.Logger.InfoContext(ctx, "trigger_runs_started", "trigger", id, "runs", res.Started, "coalesced", res.Coalesced)
	}
	switch {
	case res.More:
		queue.Add(id)
	case res.Waiting:
		return controller.Result{RequeueAfter: f.cfg.BusyRetry}, nil
	case !res.WakeAt.IsZero():
		return controller.Result{RequeueAfter: max(res.WakeAt.Sub(now), time.Millisecond)}, nil
	}
	return controller.Result{}, nil
}

// resync queues every trigger with pending events (a signal may have been lost) and
// deletes the events past their retention.
func (f *Firer) resync(ctx context.Context, fence job.Fence, queue *controller.Queue) error {
	ids, err := f.db.PendingTriggers(ctx)
	if err != nil {
		return fmt.Errorf("read pending triggers: %w", err)
	}
	for _, id := range ids {
		queue.Add(id)
	}
	n, err := f.db.DeleteExpiredTriggerEvents(ctx, fence)
	if err != nil {
		return fmt.Errorf("delete expired trigger events: %w", err)
	}
	if n > 0 {
		f.cfg.Logger.InfoContext(ctx, "trigger_events_expired", "deleted", n)
	}
	return nil
}
