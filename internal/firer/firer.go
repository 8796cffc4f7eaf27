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
// requeued after their time, and a periodic pass queues every trigger with pending events
// as the safety net and deletes the events past their retention.
package firer

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/maintenance"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/trigger"
)

// Defaults of Config.
const (
	// WorkersDefault is how many triggers are fired at once.
	WorkersDefault = 4
	// IntervalDefault is the period of the safety-net pass.
	IntervalDefault = 5 * time.Second
	// BusyRetryDefault is when a trigger whose target was busy is tried again (a run's
	// end wakes nothing here).
	BusyRetryDefault = 2 * time.Second
)

// Config configures the firer.
type Config struct {
	// Workers is how many triggers are fired at once (default WorkersDefault).
	Workers int
	// Interval is the period of the safety-net pass (default IntervalDefault).
	Interval time.Duration
	// BusyRetry is when a trigger whose target was busy is tried again (default
	// BusyRetryDefault).
	BusyRetry time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger receives the firings that start something (default slog.Default()).
	Logger *slog.Logger
	// Metrics counts the events started, coalesced and skipped (nil: none).
	Metrics *trigger.Metrics
	// Registerer, when set, registers the queue's metrics (datajobs_trigger_queue_*,
	// datajobs_trigger_panics_total).
	Registerer prometheus.Registerer
}

// Store is what the firer reads and writes (store.Store implements it).
type Store interface {
	controller.Listener
	PendingTriggers(ctx context.Context) ([]string, error)
	FireTrigger(ctx context.Context, fence job.Fence, id string, now time.Time) (store.TriggerFiring, error)
	DeleteExpiredTriggerEvents(ctx context.Context, fence job.Fence) (int, error)
}

// Firer fires triggers on the leader.
type Firer struct {
	cfg     Config
	db      Store
	metrics *controller.Metrics

	mu    sync.Mutex
	queue *controller.Queue // the term's; nil between terms
}

// New returns a firer of db's triggers.
func New(cfg Config, db Store) *Firer {
	cfg.Workers = cmp.Or(cfg.Workers, WorkersDefault)
	cfg.Interval = cmp.Or(cfg.Interval, IntervalDefault)
	cfg.BusyRetry = cmp.Or(cfg.BusyRetry, BusyRetryDefault)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	m := controller.NewMetrics("datajobs_trigger_queue", "trigger_fire", "Trigger ids", "datajobs_trigger_panics_total")
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(m.Collectors()...)
	}
	return &Firer{cfg: cfg, db: db, metrics: m}
}

// Service is the firer as the leader's Maintainer runs it: Start runs the term's queue,
// workers and LISTEN; each run (at the start, every Interval) is the safety-net pass.
func (f *Firer) Service() maintenance.Service {
	return maintenance.Service{Name: "trigger_firer", Period: f.cfg.Interval, AtStart: true, Start: f.start, RunOnce: f.pass}
}

// start starts the term's queue of trigger ids, its workers and the LISTEN that feeds it;
// the wait it returns stops them once ctx is done.
func (f *Firer) start(ctx context.Context, fence job.Fence) func() {
	q := controller.NewQueue(f.metrics, controller.Exponential(100*time.Millisecond, 30*time.Second), f.cfg.Logger, "trigger", "trigger_fire_failed")
	f.mu.Lock()
	f.queue = q
	f.mu.Unlock()
	wait := controller.ListenedQueue(ctx, q, f.cfg.Workers, func(ctx context.Context, key string) (controller.Result, error) { return f.fire(ctx, q, fence, key) },
		f.db, store.TriggerEventsChannel, f.cfg.Logger, func() { f.queuePending(ctx, q) })
	return func() {
		wait()
		f.mu.Lock()
		f.queue = nil
		f.mu.Unlock()
	}
}

// fire turns the oldest pending events of the trigger id into runs; with more left, it
// queues the trigger again on q at once (the queue hands it out again once this
// reconcile is done).
func (f *Firer) fire(ctx context.Context, q *controller.Queue, fence job.Fence, id string) (controller.Result, error) {
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
		q.Add(id)
	case res.Waiting:
		return controller.Result{RequeueAfter: f.cfg.BusyRetry}, nil
	case !res.WakeAt.IsZero():
		return controller.Result{RequeueAfter: max(res.WakeAt.Sub(now), time.Millisecond)}, nil
	}
	return controller.Result{}, nil
}

// pass queues every trigger with pending events (a signal may have been lost) and deletes
// the events past their retention.
func (f *Firer) pass(ctx context.Context, fence job.Fence) (maintenance.Counts, error) {
	f.mu.Lock()
	q := f.queue
	f.mu.Unlock()
	counts := maintenance.Counts{"queued": 0, "expired_events": 0}
	if q != nil {
		counts["queued"] = f.queuePending(ctx, q)
	}
	n, err := f.db.DeleteExpiredTriggerEvents(ctx, fence)
	counts["expired_events"] = n
	return counts, err
}

// queuePending queues every trigger with pending events and returns how many.
func (f *Firer) queuePending(ctx context.Context, q *controller.Queue) int {
	ids, err := f.db.PendingTriggers(ctx)
	if err != nil {
		f.cfg.Logger.WarnContext(ctx, "pending_triggers_unread", "error", err)
		return 0
	}
	for _, id := range ids {
		q.Add(id)
	}
	return len(ids)
}
