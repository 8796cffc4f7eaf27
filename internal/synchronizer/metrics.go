package synchronizer

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"

	"github.com/datajobs/datajobs/internal/job"
)

// Metrics is the synchronizer's telemetry. Labels are low-cardinality: never a job name.
type Metrics struct {
	passes          *prometheus.CounterVec
	passDuration    prometheus.Histogram
	reconciles      *prometheus.CounterVec
	driftRepairs    prometheus.Counter
	orphansRemoved  prometheus.Counter
	deployments     *prometheus.GaugeVec
	lag             prometheus.Histogram
	plannedActions  *prometheus.GaugeVec
	queueMu         sync.Mutex
	currentQueueLen func() int
}

// NewMetrics registers the synchronizer's metrics on reg (nil: registered nowhere).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "datajobs_sync_passes_total", Help: "Full resync passes, by result (ok or error).",
		}, []string{"result"}),
		passDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "datajobs_sync_pass_duration_seconds", Help: "Time to load and plan every job in a full resync pass.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}),
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "datajobs_sync_reconciles_total", Help: "Reconciles of one job, by planned action and result (ok or error).",
		}, []string{"action", "result"}),
		driftRepairs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "datajobs_sync_drift_repairs_total", Help: "CronJobs edited outside datajobs and reverted.",
		}),
		orphansRemoved: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "datajobs_sync_orphans_removed_total", Help: "Managed CronJobs deleted because no data job knows them.",
		}),
		deployments: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "datajobs_sync_deployments", Help: "Deployments by sync status, as of the last resync pass.",
		}, []string{"status"}),
		plannedActions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "datajobs_sync_planned_jobs", Help: "Jobs by the action the last full pass planned for them (in dry-run mode: what would be done).",
		}, []string{"action"}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "datajobs_sync_lag_seconds", Help: "Time from a desired change being committed to its CronJob write.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 16),
		}),
	}
	if reg != nil {
		queueDepth := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "datajobs_sync_queue_depth", Help: "Job names waiting to be reconciled.",
		}, func() float64 {
			m.queueMu.Lock()
			defer m.queueMu.Unlock()
			if m.currentQueueLen == nil {
				return 0
			}
			return float64(m.currentQueueLen())
		})
		reg.MustRegister(m.passes, m.passDuration, m.reconciles, m.driftRepairs, m.orphansRemoved, m.deployments, m.lag, m.plannedActions, queueDepth)
	}
	return m
}

func (m *Metrics) queue(q workqueue.TypedRateLimitingInterface[string]) {
	m.queueMu.Lock()
	defer m.queueMu.Unlock()
	m.currentQueueLen = q.Len
}

func (m *Metrics) reconciled(action string, err error) {
	m.reconciles.WithLabelValues(action, result(err)).Inc()
}

func (m *Metrics) passDone(start time.Time, err error) {
	m.passes.WithLabelValues(result(err)).Inc()
	if err == nil {
		m.passDuration.Observe(time.Since(start).Seconds())
	}
}

func (m *Metrics) observeLag(changed time.Time) {
	if !changed.IsZero() {
		m.lag.Observe(max(time.Since(changed).Seconds(), 0))
	}
}

func (m *Metrics) deploymentsByStatus(counts map[job.SyncStatus]int) {
	for _, s := range []job.SyncStatus{job.StatusPending, job.StatusSynced, job.StatusUserError, job.StatusPlatformError, job.StatusDeleting} {
		m.deployments.WithLabelValues(string(s)).Set(float64(counts[s]))
	}
}

func result(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

func (m *Metrics) planned(plans []Plan) {
	counts := map[Action]int{}
	for _, p := range plans {
		counts[p.Action]++
	}
	for _, a := range Actions {
		m.plannedActions.WithLabelValues(string(a)).Set(float64(counts[a]))
	}
}
