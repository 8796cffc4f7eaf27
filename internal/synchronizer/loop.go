package synchronizer

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// workQueue is a deduplicating, rate-limited client-go work queue of keys (job names,
// execution ids), with what runQueue needs to handle each key's outcome the same way for
// every queue: its metrics (client-go's workqueue instrumentation and the results) and a
// logger, with the name of what a key stands for.
type workQueue struct {
	workqueue.TypedRateLimitingInterface[string]
	metrics *queueMetrics
	log     *slog.Logger
	// keyName is the log attribute of a key ("job", "execution").
	keyName string
	// failed is the log event of a failed reconcile ("" when the reconcile logs its own).
	failed string
}

// newWorkQueue returns a queue whose keys back off as limiter says (see exponential).
func newWorkQueue(m *queueMetrics, limiter workqueue.TypedRateLimiter[string], log *slog.Logger, keyName, failed string) *workQueue {
	m.newTerm()
	return &workQueue{
		TypedRateLimitingInterface: workqueue.NewTypedRateLimitingQueueWithConfig(limiter,
			workqueue.TypedRateLimitingQueueConfig[string]{Name: m.prefix, MetricsProvider: m}),
		metrics: m, log: log, keyName: keyName, failed: failed,
	}
}

// exponential is a per-key backoff doubling from base to max.
func exponential(base, max time.Duration) workqueue.TypedRateLimiter[string] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[string](base, max)
}

// runQueue takes keys off q with that many workers until q shuts down, and returns when
// they have all stopped. It is modelled on controller-runtime's reconcileHandler: each key
// is reconciled alone (the queue never hands the same key to two workers), and its result
// decides what happens next (workQueue.finish). A panic is recovered, logged with the key
// and its stack, counted, and retried with backoff like any failure, so that one bad key
// neither kills the process nor, through it, the next leader.
func runQueue(ctx context.Context, q *workQueue, workers int, reconcile func(context.Context, string) (result, error)) {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				key, shutdown := q.Get()
				if shutdown {
					return
				}
				res, err := q.safely(ctx, key, reconcile)
				if !res.handedOver {
					q.finish(ctx, key, res, err)
				}
			}
		})
	}
	wg.Wait()
}

// safely is reconcile with a panic turned into an error.
func (q *workQueue) safely(ctx context.Context, key string, reconcile func(context.Context, string) (result, error)) (res result, err error) {
	defer func() {
		if r := recover(); r != nil {
			q.metrics.panics.Inc()
			//nolint:sloglint // a constant of each queue, fixed where it is made (docs/architecture.md names them)
			q.log.ErrorContext(ctx, q.metrics.subject+"_panic", q.keyName, key, "panic", r, "stack", string(debug.Stack()))
			res, err = result{}, fmt.Errorf("reconcile %s: panic: %v", key, r)
		}
	}()
	return reconcile(ctx, key)
}

// finish plans a key's next look after its reconcile ended with res and err, and marks it
// done, so that another event of it can be handled: an error or a retry backs off; a
// requeue-after looks again then; a terminal result is not retried (only a change can
// help); success forgets the key's backoff. Once the term is over nothing is planned:
// the next leader starts with a full pass.
func (q *workQueue) finish(ctx context.Context, key string, res result, err error) {
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
	case res.retry:
		q.metrics.result("requeue")
		q.AddRateLimited(key)
	case res.requeueAfter > 0:
		q.metrics.result("requeue_after")
		q.Forget(key)
		q.AddAfter(key, res.requeueAfter)
	case res.terminal:
		q.metrics.result("terminal")
		q.Forget(key)
	default:
		q.metrics.result("success")
		q.Forget(key)
	}
}

// every calls fn every period until ctx ends or fn returns false.
func every(ctx context.Context, period time.Duration, fn func() bool) {
	ticker := time.NewTicker(period)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			if !fn() {
				return
			}
		}
	}
}
