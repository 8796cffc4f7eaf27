package tracker

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/metric"
)

// Metrics is the execution tracker's telemetry; labels are low-cardinality.
type Metrics struct {
	started  prometheus.Counter
	finished *prometheus.CounterVec
	duration *prometheus.HistogramVec
	writeLag prometheus.Histogram
	running  prometheus.Gauge
	// logsUnreadable counts failed reads of a finished execution's log (each is retried
	// while its pod is there); logsLost the executions whose pod was gone before its log
	// was read (the API answers that the log was not kept).
	logsUnreadable, logsLost prometheus.Counter
	// logsDropped counts the logs not kept because MaxKept others waited to be read;
	// statesDropped the last states of deleted Jobs and pods (kind) dropped past MaxKept;
	// kept is the size of each keep (kept.go).
	logsDropped   prometheus.Counter
	statesDropped *prometheus.CounterVec
	kept          *prometheus.GaugeVec
	// queue and logQueue are the tracker's queues' (status, and logs to keep).
	queue, logQueue *controller.Metrics
}

// NewMetrics registers the execution metrics on reg (nil: registered nowhere).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := metric.On(reg)
	return &Metrics{
		queue:          controller.NewMetrics(f, "executions", "execution", "Execution ids"),
		logQueue:       controller.NewMetrics(f, "execution_logs", "execution_log", "Execution ids"),
		started:        f.Counter("datajobs_executions_jobs_created_total", "Kubernetes Jobs created for manual starts."),
		finished:       f.CounterVec("datajobs_executions_finished_total", "Tracker recorded with a final status, by type and status.", "type", "status"),
		duration:       f.HistogramVec("datajobs_execution_duration_seconds", "Duration of finished executions, by final status.", prometheus.ExponentialBuckets(1, 2, 18), "status"),
		writeLag:       f.Histogram("datajobs_execution_status_write_lag_seconds", "Time from a Job or Pod event being seen to the execution's row being committed.", prometheus.ExponentialBuckets(0.001, 2, 16)),
		running:        f.Gauge("datajobs_executions_running", "Tracker recorded as running."),
		logsUnreadable: f.Counter("datajobs_execution_logs_unreadable_total", "Failed reads of a finished execution's pod log (retried while the pod is there)."),
		logsLost:       f.Counter("datajobs_execution_logs_lost_total", "Finished executions whose pod was gone before their log was read: not kept."),
		logsDropped:    f.Counter("datajobs_execution_logs_dropped_total", "Finished executions whose log was not kept because too many others waited to be read (the bound of the log queue)."),
		statesDropped:  f.CounterVec("datajobs_execution_states_dropped_total", "Last states of deleted Jobs and pods (kind) the tracker dropped past its bound before it looked at them: their outcome was read from the live objects only.", "kind"),
		kept:           f.GaugeVec("datajobs_executions_kept", "What the tracker keeps beside its caches, by kind: deleted_job and deleted_pod last states, log (pods whose log is to be kept).", "kind"),
	}
}

// recorded counts a written status; prev is the row before (nil: a new run), seen when
// the event that led to it was first seen (zero: none).
func (m *Metrics) recorded(u job.ExecutionUpdate, prev *job.TrackedExecution, seen time.Time) {
	if !seen.IsZero() {
		m.writeLag.Observe(time.Since(seen).Seconds())
	}
	was := job.ExecutionStatus("")
	if prev != nil {
		was = prev.Status
	}
	if was == job.ExecRunning {
		m.running.Dec()
	}
	if u.Status == job.ExecRunning {
		m.running.Inc()
	}
	if u.Status.Final() {
		m.finished.WithLabelValues(u.Type, string(u.Status)).Inc()
		if u.StartTime != nil && u.EndTime != nil {
			m.duration.WithLabelValues(string(u.Status)).Observe(max(u.EndTime.Sub(*u.StartTime).Seconds(), 0))
		} else if prev != nil && prev.StartTime != nil && u.EndTime != nil {
			m.duration.WithLabelValues(string(u.Status)).Observe(max(u.EndTime.Sub(*prev.StartTime).Seconds(), 0))
		}
	}
}
