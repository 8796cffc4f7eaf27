package notify

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the dispatcher's series (docs/metrics.md).
type Metrics struct {
	deliveries *prometheus.CounterVec
	depth      prometheus.Gauge
	oldest     prometheus.Gauge
}

// NewMetrics registers the dispatcher's series on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "datajobs_notifications_total",
			Help: "Notification deliveries by channel and result: delivered, retried (a retryable failure), failed (given up at --notification-max-age), bounced (refused permanently), suppressed (not sent: the recipient bounced before), postponed (held for a digest by the rate limit).",
		}, []string{"channel", "result"}),
		depth: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "datajobs_notifications_outbox_depth", Help: "Notification deliveries (and events not yet expanded into deliveries) not yet accepted by their transport.",
		}),
		oldest: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "datajobs_notifications_oldest_undelivered_seconds", Help: "Age of the oldest event with a delivery not yet accepted (0: none).",
		}),
	}
	reg.MustRegister(m.deliveries, m.depth, m.oldest)
	return m
}
