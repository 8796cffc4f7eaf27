package leader

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/datajobs/datajobs/internal/metric"
)

// Metrics tell operators which replica leads and how often leadership moves: a flapping
// leader (many transitions) means renewals are failing, usually a slow or unreachable
// database. The label "lease" is the lease name, one value per leadership.
type Metrics struct {
	isLeader    *prometheus.GaugeVec
	epoch       *prometheus.GaugeVec
	transitions *prometheus.CounterVec
}

// NewMetrics creates the leader metrics and registers them on reg. Electors of one
// process share one Metrics.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := metric.On(reg)
	return &Metrics{
		isLeader:    f.GaugeVec("datajobs_leader_is_leader", "1 while this replica holds the lease and runs the leader's work, else 0.", "lease"),
		epoch:       f.GaugeVec("datajobs_leader_epoch", "Fencing token of this replica's current or last term of leadership (0 before the first).", "lease"),
		transitions: f.CounterVec("datajobs_leader_transitions_total", "Times this replica started or stopped leading.", "lease"),
	}
}
