// Package stats holds the order statistics the benchmarks report, so that every
// benchmark's p50 and p99 mean the same thing.
package stats

import (
	"math"
	"slices"
	"time"
)

// Percentiles returns the ps-th percentiles (0 < p <= 100) of ds by the nearest-rank
// method: for each p, the smallest value that at least p % of ds are at or under
// (p = 50 is the median, p = 100 the maximum). Zeros when ds is empty; ds is not modified.
func Percentiles(ds []time.Duration, ps ...float64) []time.Duration {
	out := make([]time.Duration, len(ps))
	if len(ds) == 0 {
		return out
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	for i, p := range ps {
		rank := int(math.Ceil(p/100*float64(len(s)))) - 1
		out[i] = s[min(max(rank, 0), len(s)-1)]
	}
	return out
}

// Percentile is Percentiles for one p.
func Percentile(ds []time.Duration, p float64) time.Duration {
	return Percentiles(ds, p)[0]
}
