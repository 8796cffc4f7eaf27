package controller

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/datajobs/datajobs/internal/metric"
)

// ResyncKey is the queue key of a keyed controller's resync (Keyed): never an id.
const ResyncKey = "#resync"

// KeyedConfig names a Keyed loop's queue, its wake-ups and its logs.
type KeyedConfig struct {
	// Registerer, when set, registers the queue's metrics.
	Registerer prometheus.Registerer
	// Channel is the NOTIFY channel whose payloads wake keys.
	Channel string
	// Name names the queue's metrics: datajobs_<Name>_queue_* and
	// datajobs_<Name>_panics_total (NewMetrics).
	Name string
	// Subject and Items name a panic's log event (Subject+"_panic") and the keys in the
	// metrics' help texts (NewMetrics); a failed reconcile is logged as Subject+"_failed".
	Subject, Items string
	// KeyName is the log attribute of a key (NewQueue).
	KeyName string
	// KeyOf turns a NOTIFY's payload into a key (nil: the payload is the key).
	KeyOf func(payload string) string
}

// Keyed is the loop of a controller keyed by ids and woken by NOTIFY (the pipeline stepper,
// the trigger firer): for each leadership term, a queue of ids reconciled by Workers, a
// LISTEN whose payloads are keys, and the resync as a key of the same queue (ResyncKey),
// planned once the term listens (nothing sent from then on is missed), after each
// reconnection (a notification may have been lost meanwhile) and every Interval. The
// resync is the reconciler's periodic look, handled by a worker like any key, so it
// never runs twice at once and shares the workers' bound.
type Keyed struct {
	set       Settings
	cfg       KeyedConfig
	db        Listener
	reconcile TermReconcile
	metrics   *Metrics
}

// NewKeyed returns the loop of cfg on db's LISTEN whose keys reconcile handles, with
// settings s (WithDefaults applied), its metrics registered on cfg.Registerer when set.
// A controller embeds it: its Run is the controller's.
func NewKeyed(s Settings, cfg KeyedConfig, db Listener, reconcile TermReconcile) *Keyed {
	if cfg.KeyOf == nil {
		cfg.KeyOf = func(payload string) string { return payload }
	}
	m := NewMetrics(metric.On(cfg.Registerer), cfg.Name, cfg.Subject, cfg.Items)
	return &Keyed{set: s, cfg: cfg, db: db, reconcile: reconcile, metrics: m}
}

// Term is one leadership term of a Keyed loop as its reconcile sees it: the lease epoch
// that fences the term's writes, and the term's queue, to which a reconcile may add keys.
type Term struct {
	Epoch int64
	Queue *Queue
}

// TermReconcile handles one key of a term.
type TermReconcile func(ctx context.Context, t Term, key string) (Result, error)

// Run reconciles keys until ctx ends, as the leader of term epoch: a new queue (a deposed
// term's keys go with its queue), the workers running the reconcile, the LISTEN whose
// payloads are keys (KeyOf) and the resync's plans. On return every goroutine it started
// has stopped.
func (k *Keyed) Run(ctx context.Context, epoch int64) error {
	q := NewQueue(k.metrics, Exponential(100*time.Millisecond, 30*time.Second), k.set.Logger, k.cfg.KeyName, k.cfg.Subject+"_failed")
	t := Term{Epoch: epoch, Queue: q}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer q.ShutDown()
	wg.Go(func() {
		Run(ctx, q, k.set.Workers, func(ctx context.Context, key string) (Result, error) { return k.reconcile(ctx, t, key) })
	})
	wg.Go(func() {
		Listen(ctx, k.db, k.cfg.Channel, 500*time.Millisecond, k.set.Logger,
			func(bool) { q.Add(ResyncKey) }, func(payload string) { q.Add(k.cfg.KeyOf(payload)) })
	})
	wg.Go(func() { Every(ctx, k.set.Interval, func() bool { q.Add(ResyncKey); return true }) })
	<-ctx.Done()
	return nil
}
