package controller

import (
	"cmp"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/datajobs/datajobs/internal/metric"
)

// ResyncKey is the queue key of a keyed controller's resync (Keyed): never an id.
const ResyncKey = "#resync"

// KeyedConfig configures a Keyed loop: the settings a controller's own Config gives it
// (its defaults applied by the controller, which names them) and the names of its queue.
type KeyedConfig struct {
	// Workers is how many keys are reconciled at once (the controller's default).
	Workers int
	// Interval is the period of the resync (the controller's default).
	Interval time.Duration
	// Logger receives the failed reconciles and the LISTEN's failures (default
	// slog.Default()).
	Logger *slog.Logger
	// Registerer, when set, registers the queue's metrics.
	Registerer prometheus.Registerer
	// Channel is the NOTIFY channel whose payloads wake keys.
	Channel string
	// Prefix, Subject, Items and Panics name the metrics (NewMetrics).
	Prefix, Subject, Items, Panics string
	// KeyName and Failed are the log attribute of a key and the event of a failed
	// reconcile (NewQueue).
	KeyName, Failed string
}

// Keyed is the loop of a controller keyed by ids and woken by NOTIFY (the pipeline stepper,
// the trigger firer): for each leadership term, a queue of ids reconciled by Workers, a
// LISTEN whose payloads are keys, and the resync as a key of the same queue (ResyncKey),
// planned once the term listens (nothing sent from then on is missed), after each
// reconnection (a notification may have been lost meanwhile) and every Interval. The
// resync is the reconciler's periodic look, handled by a worker like any key, so it
// never runs twice at once and shares the workers' bound.
type Keyed struct {
	cfg     KeyedConfig
	db      Listener
	metrics *Metrics
}

// NewKeyed returns the loop of cfg on db's LISTEN, its metrics registered on
// cfg.Registerer when set.
func NewKeyed(cfg KeyedConfig, db Listener) *Keyed {
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	m := NewMetrics(metric.On(cfg.Registerer), cfg.Prefix, cfg.Subject, cfg.Items, cfg.Panics)
	return &Keyed{cfg: cfg, db: db, metrics: m}
}

// Logger is the loop's logger, for its reconciler's own events.
func (k *Keyed) Logger() *slog.Logger { return k.cfg.Logger }

// Term is one leadership term of a Keyed loop as its reconcile sees it: the lease epoch
// that fences the term's writes, and the term's queue, to which a reconcile may add keys.
type Term struct {
	Epoch int64
	Queue *Queue
}

// TermReconcile handles one key of a term.
type TermReconcile func(ctx context.Context, t Term, key string) (Result, error)

// Run reconciles keys until ctx ends, as the leader of term epoch: a new queue (a deposed
// term's keys go with its queue), the workers running reconcile, the LISTEN (keyOf turns
// a payload into a key; nil: the payload is the key) and the resync's plans. On return
// every goroutine it started has stopped.
func (k *Keyed) Run(ctx context.Context, epoch int64, keyOf func(payload string) string, reconcile TermReconcile) error {
	if keyOf == nil {
		keyOf = func(payload string) string { return payload }
	}
	q := NewQueue(k.metrics, Exponential(100*time.Millisecond, 30*time.Second), k.cfg.Logger, k.cfg.KeyName, k.cfg.Failed)
	t := Term{Epoch: epoch, Queue: q}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer q.ShutDown()
	wg.Go(func() {
		Run(ctx, q, k.cfg.Workers, func(ctx context.Context, key string) (Result, error) { return reconcile(ctx, t, key) })
	})
	wg.Go(func() {
		Listen(ctx, k.db, k.cfg.Channel, 500*time.Millisecond, k.cfg.Logger,
			func(bool) { q.Add(ResyncKey) }, func(payload string) { q.Add(keyOf(payload)) })
	})
	wg.Go(func() { Every(ctx, k.cfg.Interval, func() bool { q.Add(ResyncKey); return true }) })
	<-ctx.Done()
	return nil
}
