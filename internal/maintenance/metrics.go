package maintenance

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
	m := &Metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "datajobs_maintenance_runs_total", Help: "Runs of each leader maintenance service.",
		}, []string{"service"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "datajobs_maintenance_errors_total", Help: "Runs of each maintenance service that returned an error.",
		}, []string{"service"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "datajobs_maintenance_run_duration_seconds", Help: "Duration of each maintenance service's runs.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"service"}),
		counted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "datajobs_maintenance_counted_total", Help: "What the maintenance services' runs did (rows deleted, runs skipped, ...), by service and count.",
		}, []string{"service", "count"}),
	}
	if reg != nil {
		reg.MustRegister(m.runs, m.errors, m.duration, m.counted)
	}
	return m
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
