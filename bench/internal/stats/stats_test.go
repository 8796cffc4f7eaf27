package stats_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/bench/internal/stats"
)

func TestPercentilesByNearestRank(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	got := stats.Percentiles(ds, 50, 90, 99, 100)
	require.Equal(t, []time.Duration{50 * time.Millisecond, 90 * time.Millisecond, 99 * time.Millisecond, 100 * time.Millisecond}, got)
	require.Equal(t, 100*time.Millisecond, ds[0], "the input is left as it was")

	three := []time.Duration{3, 1, 2}
	require.Equal(t, time.Duration(2), stats.Percentile(three, 50), "the median of three is the middle one")
	require.Equal(t, time.Duration(3), stats.Percentile(three, 99))
	require.Equal(t, time.Duration(1), stats.Percentile(three, 1))
	require.Equal(t, []time.Duration{0, 0}, stats.Percentiles(nil, 50, 99))
}
