package synchronizer

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// queueMetrics exports client-go's own workqueue instrumentation (depth, adds, wait and
// work times, retries, stuck work) on the synchronizer's registry. It is the queue's
// MetricsProvider: each term's new queue gets the same collectors, since there is one
// queue at a time and its name would only repeat the subsystem.
type queueMetrics struct {
	depth          prometheus.Gauge
	adds           prometheus.Counter
	latency        prometheus.Histogram
	workDuration   prometheus.Histogram
	unfinished     prometheus.Gauge
	longestRunning prometheus.Gauge
	retries        prometheus.Counter
}

func newQueueMetrics() *queueMetrics {
	buckets := prometheus.ExponentialBuckets(0.001, 4, 10)
	return &queueMetrics{
		depth: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "datajobs_sync_queue_depth", Help: "Job names waiting to be reconciled.",
		}),
		adds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "datajobs_sync_queue_adds_total", Help: "Job names added to the work queue.",
		}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "datajobs_sync_queue_latency_seconds", Help: "Time a job name waits in the queue before a worker takes it.", Buckets: buckets,
		}),
		workDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "datajobs_sync_queue_work_duration_seconds", Help: "Time a worker spends on one queue item (a reconcile or a full pass).", Buckets: buckets,
		}),
		unfinished: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "datajobs_sync_queue_unfinished_work_seconds", Help: "Seconds of work in progress not yet done; growing, it means a stuck worker.",
		}),
		longestRunning: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "datajobs_sync_queue_longest_running_processor_seconds", Help: "Age of the longest reconcile in progress.",
		}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "datajobs_sync_queue_retries_total", Help: "Job names re-queued with backoff after a failure or a stale view.",
		}),
	}
}

func (q *queueMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{q.depth, q.adds, q.latency, q.workDuration, q.unfinished, q.longestRunning, q.retries}
}

func (q *queueMetrics) NewDepthMetric(string) workqueue.GaugeMetric            { return q.depth }
func (q *queueMetrics) NewAddsMetric(string) workqueue.CounterMetric           { return q.adds }
func (q *queueMetrics) NewLatencyMetric(string) workqueue.HistogramMetric      { return q.latency }
func (q *queueMetrics) NewWorkDurationMetric(string) workqueue.HistogramMetric { return q.workDuration }
func (q *queueMetrics) NewRetriesMetric(string) workqueue.CounterMetric        { return q.retries }

func (q *queueMetrics) NewUnfinishedWorkSecondsMetric(string) workqueue.SettableGaugeMetric {
	return q.unfinished
}

func (q *queueMetrics) NewLongestRunningProcessorSecondsMetric(string) workqueue.SettableGaugeMetric {
	return q.longestRunning
}

// newTerm resets what a previous term's queue left: its items were dropped with it.
func (q *queueMetrics) newTerm() {
	q.depth.Set(0)
	q.unfinished.Set(0)
	q.longestRunning.Set(0)
}
