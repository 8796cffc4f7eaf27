// Package metric declares Prometheus collectors in one line each, registered where they
// are declared (promauto), so that no package types the same option literals again and no
// metric is declared and then forgotten in a separate register list.
package metric

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Factory makes collectors registered on one registerer.
type Factory struct{ auto promauto.Factory }

// On returns a factory registering on reg; nil registers nowhere (tests, and collectors
// a caller registers itself). A name registered twice panics, as MustRegister does.
func On(reg prometheus.Registerer) Factory { return Factory{auto: promauto.With(reg)} }

// Counter is a counter without labels.
func (f Factory) Counter(name, help string) prometheus.Counter {
	return f.auto.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

// CounterVec is a counter with labels.
func (f Factory) CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return f.auto.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

// Gauge is a gauge without labels.
func (f Factory) Gauge(name, help string) prometheus.Gauge {
	return f.auto.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
}

// GaugeVec is a gauge with labels.
func (f Factory) GaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return f.auto.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
}

// Histogram is a histogram without labels.
func (f Factory) Histogram(name, help string, buckets []float64) prometheus.Histogram {
	return f.auto.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
}

// HistogramVec is a histogram with labels.
func (f Factory) HistogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return f.auto.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
}
