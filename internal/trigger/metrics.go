package trigger

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics counts the events of triggers by kind (webhook, outcome, object) and what they
// came to: received (recorded), deduplicated (a repeated key), refused (a bad signature,
// the rate limit, a body too large: nothing recorded), coalesced (consumed by an earlier
// event's run), started (started a run), skipped (the target disabled or gone). The API
// counts the first three, the leader's firer the others. Nil counts nothing.
type Metrics struct {
	events *prometheus.CounterVec
}

// The outcomes of Metrics.
const (
	Received     = "received"
	Deduplicated = "deduplicated"
	Refused      = "refused"
	CoalescedOut = "coalesced"
	StartedOut   = "started"
	SkippedOut   = "skipped"
)

// NewMetrics registers the counters on reg (none when reg is nil). The API's and the
// leader's halves call it each with the server's registry: the second gets the counters
// the first registered.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{events: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "datajobs_trigger_events_total",
		Help: "Events of triggers, by kind (webhook, outcome, object) and outcome (received, deduplicated, refused, coalesced, started, skipped).",
	}, []string{"kind", "outcome"})}
	if reg == nil {
		return m
	}
	if err := reg.Register(m.events); err != nil {
		are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err)
		if !ok {
			panic(fmt.Sprintf("register trigger metrics: %v", err))
		}
		m.events = are.ExistingCollector.(*prometheus.CounterVec) //nolint:forcetypeassert // registered above with this type
	}
	return m
}

// Add counts n events of kind with outcome.
func (m *Metrics) Add(kind, outcome string, n int) {
	if m == nil || n <= 0 {
		return
	}
	m.events.WithLabelValues(kind, outcome).Add(float64(n))
}
