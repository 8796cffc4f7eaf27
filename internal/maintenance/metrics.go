package maintenance

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/datajobs/datajobs/internal/metric"
)

// Metrics is the maintenance services' telemetry, labelled by service name (a fixed set)
// and, for the counts, by what a service counts (a fixed set per service).
type Metrics struct {
	runs, errors *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	counted      *prometheus.CounterVec
}

// NewMetrics registers the maintenance metrics on reg (nil: registered nowhere).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := metric.On(reg)
	return &Metrics{
		runs:     f.CounterVec("datajobs_maintenance_runs_total", "Runs of each leader maintenance service.", "service"),
		errors:   f.CounterVec("datajobs_maintenance_errors_total", "Runs of each maintenance service that returned an error.", "service"),
		duration: f.HistogramVec("datajobs_maintenance_run_duration_seconds", "Duration of each maintenance service's runs.", prometheus.ExponentialBuckets(0.001, 4, 10), "service"),
		counted:  f.CounterVec("datajobs_maintenance_counted_total", "What the maintenance services' runs did (rows deleted, runs skipped, ...), by service and count.", "service", "count"),
	}
}

// ran records one run of service.
func (m *Metrics) ran(service string, took time.Duration, counts Counts, err error) {
	m.runs.WithLabelValues(service).Inc()
	m.duration.WithLabelValues(service).Observe(took.Seconds())
	if err != nil {
		m.errors.WithLabelValues(service).Inc()
	}
	for k, n := range counts {
		if n > 0 {
			m.counted.WithLabelValues(service, k).Add(float64(n))
		}
	}
}
