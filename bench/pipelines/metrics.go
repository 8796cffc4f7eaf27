package main

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// queueStats are the sums of the two queues' histograms (the stepper's runs, the
// tracker's executions) at one moment: how long items waited for a worker and how long a
// worker spent on one, to say which side a latency is spent in.
type queueStats map[string]struct {
	count uint64
	sum   float64
}

// queues are the histograms queueStats reads.
var queues = []string{
	"datajobs_pipeline_runs_queue_latency_seconds", "datajobs_pipeline_runs_queue_work_duration_seconds",
	"datajobs_executions_queue_latency_seconds", "datajobs_executions_queue_work_duration_seconds",
}

func gather(reg *prometheus.Registry) queueStats {
	out := queueStats{}
	families, err := reg.Gather()
	if err != nil {
		return out
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if h := m.GetHistogram(); h != nil {
				out[f.GetName()] = struct {
					count uint64
					sum   float64
				}{h.GetSampleCount(), h.GetSampleSum()}
			}
		}
	}
	return out
}

// print writes, for each queue histogram, the items and their mean since before.
func (s queueStats) print(before queueStats) {
	for _, name := range queues {
		n := s[name].count - before[name].count
		if n == 0 {
			fmt.Printf("  %s: none\n", name)
			continue
		}
		mean := time.Duration((s[name].sum - before[name].sum) / float64(n) * float64(time.Second))
		fmt.Printf("  %s: %d, mean %s\n", name, n, mean.Round(100*time.Microsecond))
	}
}
