package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"

	"github.com/datajobs/datajobs/internal/metric"
)

// Metrics exports client-go's own workqueue instrumentation (depth, adds, wait and
// work times, retries, stuck work) of one of the leader's queues, with the results of its
// reconciles and its panics (Run). It is the queue's MetricsProvider: each term's
// new queue gets the same collectors, since there is one queue of a kind at a time and
// its name is already in the metric names (prefix).
type Metrics struct {
	// prefix names the metrics (datajobs_sync_queue_depth, ...) and the queue; subject
	// names the log event of a panic (sync_panic, ...).
	prefix, subject string

	depth          prometheus.Gauge
	adds           prometheus.Counter
	latency        prometheus.Histogram
	workDuration   prometheus.Histogram
	unfinished     prometheus.Gauge
	longestRunning prometheus.Gauge
	retries        prometheus.Counter
	results        *prometheus.CounterVec
	panics         prometheus.Counter
}

// NewMetrics returns the metrics of the queue of items (what its Help texts call a
// key), named for name (datajobs_<name>_queue_depth, ...), whose panics are logged as
// subject+"_panic" and counted as datajobs_<name>_panics_total, registered by f with the
// owner's others.
func NewMetrics(f metric.Factory, name, subject, items string) *Metrics {
	prefix := "datajobs_" + name + "_queue"
	buckets := prometheus.ExponentialBuckets(0.001, 4, 10)
	return &Metrics{
		prefix: prefix, subject: subject,
		depth:          f.Gauge(prefix+"_depth", items+" waiting to be reconciled."),
		adds:           f.Counter(prefix+"_adds_total", items+" added to the work queue."),
		latency:        f.Histogram(prefix+"_latency_seconds", "Time an item waits in the queue before a worker takes it.", buckets),
		workDuration:   f.Histogram(prefix+"_work_duration_seconds", "Time a worker spends on one queue item (a reconcile or a full pass).", buckets),
		unfinished:     f.Gauge(prefix+"_unfinished_work_seconds", "Seconds of work in progress not yet done; growing, it means a stuck worker."),
		longestRunning: f.Gauge(prefix+"_longest_running_processor_seconds", "Age of the longest reconcile in progress."),
		retries:        f.Counter(prefix+"_retries_total", items+" re-queued with backoff after a failure or a stale view."),
		results:        f.CounterVec(prefix+"_results_total", "Reconciles by result: success, error, requeue (with backoff), requeue_after, terminal (not retried until something changes).", "result"),
		panics:         f.Counter("datajobs_"+name+"_panics_total", "Reconciles that panicked (recovered, logged with the key, retried with backoff)."),
	}
}

func (q *Metrics) result(r string) { q.results.WithLabelValues(r).Inc() }

// The workqueue.MetricsProvider methods hand client-go the queue's collectors.

// NewDepthMetric is the queue's depth.
func (q *Metrics) NewDepthMetric(string) workqueue.GaugeMetric { return q.depth }

// NewAddsMetric is the keys added.
func (q *Metrics) NewAddsMetric(string) workqueue.CounterMetric { return q.adds }

// NewLatencyMetric is the wait before a worker takes a key.
func (q *Metrics) NewLatencyMetric(string) workqueue.HistogramMetric { return q.latency }

// NewWorkDurationMetric is the time spent on a key.
func (q *Metrics) NewWorkDurationMetric(string) workqueue.HistogramMetric { return q.workDuration }

// NewRetriesMetric is the keys re-queued with backoff.
func (q *Metrics) NewRetriesMetric(string) workqueue.CounterMetric { return q.retries }

// NewUnfinishedWorkSecondsMetric is the work in progress not yet done.
func (q *Metrics) NewUnfinishedWorkSecondsMetric(string) workqueue.SettableGaugeMetric {
	return q.unfinished
}

// NewLongestRunningProcessorSecondsMetric is the age of the longest reconcile in progress.
func (q *Metrics) NewLongestRunningProcessorSecondsMetric(string) workqueue.SettableGaugeMetric {
	return q.longestRunning
}

// newTerm resets what a previous term's queue left: its items were dropped with it.
func (q *Metrics) newTerm() {
	q.depth.Set(0)
	q.unfinished.Set(0)
	q.longestRunning.Set(0)
}
