package vdkmetrics_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testenv"
	"github.com/datajobs/datajobs/internal/vdkmetrics"
)

// counting is the real store, counting its reads; down makes them fail (the database
// going away, which the real one does not do on cue).
type counting struct {
	*store.Store
	mu          sync.Mutex
	reads, down int
}

func (c *counting) VDKJobGauges(ctx context.Context, limit int) ([]job.VDKJobGauges, error) {
	c.mu.Lock()
	c.reads++
	down := c.down > 0
	c.mu.Unlock()
	if down {
		return nil, errors.New("database unreachable")
	}
	return c.Store.VDKJobGauges(ctx, limit)
}

// Scrapes within the cache age read the database once (a Prometheus scraping every
// second, or several of them, is not a query per scrape); a failed read answers the last
// gauges rather than none (an alert rule would read "no job" as "resolved"); at most
// MaxJobs jobs are exported.
func TestGaugesAreReadOncePerMaxAgeBoundedAndSurviveAFailedRead(t *testing.T) {
	t.Parallel()
	src := &counting{Store: testenv.Store(t)}
	for _, n := range []string{"job-a", "job-b", "job-c"} {
		_, err := src.CreateJob(t.Context(), job.Job{Name: n, Team: "team-a"})
		require.NoError(t, err)
	}
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	c := vdkmetrics.New(src, vdkmetrics.Config{MaxAge: 5 * time.Second, MaxJobs: 2, Now: clock})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)

	require.Equal(t, 4, count(t, reg), "2 jobs (the bound) x info and delay")
	require.Equal(t, 4, count(t, reg))
	require.Equal(t, 1, src.reads, "one read within the cache age")

	mu.Lock()
	now = now.Add(6 * time.Second)
	mu.Unlock()
	src.mu.Lock()
	src.down = 1
	src.mu.Unlock()
	require.Equal(t, 4, count(t, reg), "the last read's gauges while the database is away")
	require.Equal(t, 2, src.reads)
}

// count gathers reg as a scrape does (checking the series are consistent) and counts
// the series of VDK's gauges.
func count(t *testing.T, reg *prometheus.Registry) int {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	n := 0
	for _, f := range families {
		n += len(f.GetMetric())
	}
	return n
}
