package slots

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/datajobs/datajobs/internal/metric"
)

// Why a request was refused, the reason label of datajobs_admission_refusals_total.
const (
	reasonQueueFull = "queue_full" // every slot in use and the queue full (or no queue)
	reasonWaitOver  = "wait_over"  // it waited Queue.Wait and no slot came
	reasonGone      = "gone"       // its client went away while it waited
)

// Metrics counts, by kind, the requests that waited for a slot, how long, and the
// refusals, and shows how many wait now: a kind whose waits grow is one whose limit is
// too low for its load, one with refusals is one whose clients see 429.
type Metrics struct {
	waits    *prometheus.HistogramVec
	refusals *prometheus.CounterVec
	queued   *prometheus.GaugeVec
}

// NewMetrics registers the admission metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := metric.On(reg)
	return &Metrics{
		waits:    f.HistogramVec("datajobs_admission_wait_seconds", "Time requests waited for a slot of their kind (every slot was in use), by kind and whether they got one.", []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}, "kind", "admitted"),
		refusals: f.CounterVec("datajobs_admission_refusals_total", "Requests refused with 429 for want of a slot, by kind and reason (queue_full, wait_over, gone).", "kind", "reason"),
		queued:   f.GaugeVec("datajobs_admission_queued_requests", "Requests waiting for a slot now, by kind (at most the kind's limit).", "kind"),
	}
}

func (m *Metrics) waited(kind string, d time.Duration, admitted bool) {
	if m == nil {
		return
	}
	label := "false"
	if admitted {
		label = "true"
	}
	m.waits.WithLabelValues(kind, label).Observe(d.Seconds())
}

func (m *Metrics) refused(kind, reason string) {
	if m != nil {
		m.refusals.WithLabelValues(kind, reason).Inc()
	}
}

func (m *Metrics) waiting(kind string, delta float64) {
	if m != nil {
		m.queued.WithLabelValues(kind).Add(delta)
	}
}
