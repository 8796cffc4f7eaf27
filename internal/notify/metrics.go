package notify

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/datajobs/datajobs/internal/metric"
)

// Metrics are the dispatcher's series (docs/metrics.md).
type Metrics struct {
	deliveries *prometheus.CounterVec
	depth      prometheus.Gauge
	oldest     prometheus.Gauge
}

// NewMetrics registers the dispatcher's series on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := metric.On(reg)
	return &Metrics{
		deliveries: f.CounterVec("datajobs_notifications_total", "Notification deliveries by channel and result: delivered, retried (a retryable failure), failed (given up at --notification-max-age), bounced (refused permanently), suppressed (not sent: the recipient bounced before), postponed (held for a digest by the rate limit).", "channel", "result"),
		depth:      f.Gauge("datajobs_notifications_outbox_depth", "Notification deliveries (and events not yet expanded into deliveries) not yet accepted by their transport."),
		oldest:     f.Gauge("datajobs_notifications_oldest_undelivered_seconds", "Age of the oldest event with a delivery not yet accepted (0: none)."),
	}
}
