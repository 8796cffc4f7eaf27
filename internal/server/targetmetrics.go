package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/datajobs/datajobs/internal/synchronizer"
	"github.com/datajobs/datajobs/internal/tracker"
)

// targetMetrics are the synchronizer's and the tracker's metrics of one execution
// target's shard, each series labelled target="<name>" (the default target's too), so
// that every shard this replica leads shows in /metrics side by side. A shard restarted
// keeps its target's (a collector registers once per process); a target deleted takes
// them away.
type targetMetrics struct {
	sync    *synchronizer.Metrics
	tracker *tracker.Metrics
	reg     *collectorsOf // nil when they are registered nowhere
}

// newTargetMetrics registers target's shard's metrics in reg (nowhere when reg is nil).
func newTargetMetrics(reg prometheus.Registerer, target string) targetMetrics {
	if reg == nil {
		return targetMetrics{sync: synchronizer.NewMetrics(nil), tracker: tracker.NewMetrics(nil)}
	}
	c := &collectorsOf{Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"target": target}, reg)}
	return targetMetrics{sync: synchronizer.NewMetrics(c), tracker: tracker.NewMetrics(c), reg: c}
}

// unregister takes the metrics out of their registry.
func (m targetMetrics) unregister() {
	if m.reg == nil {
		return
	}
	for _, c := range m.reg.collectors {
		m.reg.Unregister(c)
	}
}

// collectorsOf is a Registerer that remembers what it registered, to unregister it all.
// It is used by one goroutine at a time (newTargetMetrics, then unregister).
type collectorsOf struct {
	prometheus.Registerer
	collectors []prometheus.Collector
}

func (r *collectorsOf) Register(c prometheus.Collector) error {
	if err := r.Registerer.Register(c); err != nil {
		return err
	}
	r.collectors = append(r.collectors, c)
	return nil
}

func (r *collectorsOf) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}
