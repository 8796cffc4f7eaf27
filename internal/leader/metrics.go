package leader

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
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
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		isLeader: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "datajobs_leader_is_leader",
			Help: "1 while this replica holds the lease and runs the leader's work, else 0.",
		}, []string{"lease"}),
		epoch: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "datajobs_leader_epoch",
			Help: "Fencing token of this replica's current or last term of leadership (0 before the first).",
		}, []string{"lease"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "datajobs_leader_transitions_total",
			Help: "Times this replica started or stopped leading.",
		}, []string{"lease"}),
	}
	for _, c := range []prometheus.Collector{m.isLeader, m.epoch, m.transitions} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register leader metrics: %w", err)
		}
	}
	return m, nil
}
