// Package controller is the loop every controller of the leader plugs its reconciler
// into, as controller-runtime keeps its loop apart from reconcilers: a deduplicating,
// rate-limited work queue of keys (Queue), workers that reconcile each key alone (Run),
// what a reconcile's Result asks for next (backoff, a later look, nothing), panics
// recovered, and the queue's metrics (Metrics). It also holds the loops' other plumbing:
// LISTEN with reconnects (Listen), the loop of a controller keyed by ids and woken by
// NOTIFY (Keyed), group commits (Batcher) and a periodic tick (Every).
// It knows nothing of jobs or executions: a key is a string the reconciler gives meaning.
package controller

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// Result is what a reconcile wants next for its key.
type Result struct {
	// RequeueAfter plans the key again after that long (0: not until something changes:
	// a NOTIFY, an informer event, the next resync).
	RequeueAfter time.Duration
	// Retry plans the key again with the per-key backoff, as after an error.
	Retry bool
	// Terminal says nothing but a change can help (a hold, a conflict, a user error), so
	// the key is not retried.
	Terminal bool
	// HandedOver says the reconcile handed the key's last step to another goroutine, which
	// finishes the key (Queue.Finish) once it is done.
	HandedOver bool
}

// Reconcile handles one key; its Result and error decide what happens next (Queue.Finish).
type Reconcile func(ctx context.Context, key string) (Result, error)

// Queue is a deduplicating, rate-limited client-go work queue of keys (job names,
// execution ids), with what Run needs to handle each key's outcome the same way for
// every queue: its metrics (client-go's workqueue instrumentation and the results) and a
// logger, with the name of what a key stands for.
type Queue struct {
	workqueue.TypedRateLimitingInterface[string]
	metrics *Metrics
	log     *slog.Logger
	// keyName is the log attribute of a key ("job", "execution").
	keyName string
	// failed is the log event of a failed reconcile ("" when the reconcile logs its own).
	failed string
}

// NewQueue returns a queue whose keys back off as limiter says (see Exponential). keyName
// is the log attribute of a key; failed the log event of a failed reconcile ("" when the
// reconcile logs its own).
func NewQueue(m *Metrics, limiter workqueue.TypedRateLimiter[string], log *slog.Logger, keyName, failed string) *Queue {
	m.newTerm()
	return &Queue{
		TypedRateLimitingInterface: workqueue.NewTypedRateLimitingQueueWithConfig(limiter,
			workqueue.TypedRateLimitingQueueConfig[string]{Name: m.prefix, MetricsProvider: m}),
		metrics: m, log: log, keyName: keyName, failed: failed,
	}
}

// Exponential is a per-key backoff doubling from base to max.
func Exponential(base, max time.Duration) workqueue.TypedRateLimiter[string] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[string](base, max)
}

// Run takes keys off q with that many workers until q shuts down, and returns when they
// have all stopped. It is modelled on controller-runtime's reconcileHandler: each key is
// reconciled alone (the queue never hands the same key to two workers), and its result
// decides what happens next (Queue.Finish). A panic is recovered, logged with the key and
// its stack, counted, and retried with backoff like any failure, so that one bad key
// neither kills the process nor, through it, the next leader.
func Run(ctx context.Context, q *Queue, workers int, reconcile Reconcile) {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				key, shutdown := q.Get()
				if shutdown {
					return
				}
				res, err := q.safely(ctx, key, reconcile)
				if !res.HandedOver {
					q.Finish(ctx, key, res, err)
				}
			}
		})
	}
	wg.Wait()
}

// safely is reconcile with a panic turned into an error.
func (q *Queue) safely(ctx context.Context, key string, reconcile Reconcile) (res Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			q.metrics.panics.Inc()
			//nolint:sloglint // a constant of each queue, fixed where it is made (docs/architecture.md names them)
			q.log.ErrorContext(ctx, q.metrics.subject+"_panic", q.keyName, key, "panic", r, "stack", string(debug.Stack()))
			res, err = Result{}, fmt.Errorf("reconcile %s: panic: %v", key, r)
		}
	}()
	return reconcile(ctx, key)
}

// Finish plans a key's next look after its reconcile ended with res and err, and marks it
// done, so that another event of it can be handled: an error or a retry backs off; a
// requeue-after looks again then; a terminal result is not retried (only a change can
// help); success forgets the key's backoff. Once the term is over nothing is planned:
// the next leader starts with a full pass. Run calls it, unless the reconcile handed the
// key over (Result.HandedOver): then whoever took it over calls it.
func (q *Queue) Finish(ctx context.Context, key string, res Result, err error) {
	defer q.Done(key)
	switch {
	case ctx.Err() != nil:
		return
	case err != nil:
		q.metrics.result("error")
		if q.failed != "" {
			//nolint:sloglint // a constant of each queue, fixed where it is made
			q.log.WarnContext(ctx, q.failed, q.keyName, key, "error", err)
		}
		q.AddRateLimited(key)
	case res.Retry:
		q.metrics.result("requeue")
		q.AddRateLimited(key)
	case res.RequeueAfter > 0:
		q.metrics.result("requeue_after")
		q.Forget(key)
		q.AddAfter(key, res.RequeueAfter)
	case res.Terminal:
		q.metrics.result("terminal")
		q.Forget(key)
	default:
		q.metrics.result("success")
		q.Forget(key)
	}
}

// Every calls fn every period until ctx ends or fn returns false.
func Every(ctx context.Context, period time.Duration, fn func() bool) {
	EveryOrWoken(ctx, period, nil, fn)
}

// EveryOrWoken calls fn every period and each time woken receives, until ctx ends or fn
// returns false; a nil woken never receives. It is the one periodic loop of the leader's
// controllers and services.
func EveryOrWoken(ctx context.Context, period time.Duration, woken <-chan struct{}, fn func() bool) {
	ticker := time.NewTicker(period)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		case <-woken:
		}
		if !fn() {
			return
		}
	}
}
