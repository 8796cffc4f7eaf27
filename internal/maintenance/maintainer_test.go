package maintenance

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
)

// fakeListener is a LISTEN whose notifications the test sends.
type fakeListener struct {
	notify chan string
}

func (l *fakeListener) Listen(ctx context.Context, _ string, ready func(), notify func(string)) error {
	ready()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case p := <-l.notify:
			notify(p)
		}
	}
}

// recorder is a service's RunOnce that records each run's fence on a channel.
type recorder struct {
	runs chan job.Fence
	err  error
}

func (r *recorder) runOnce(_ context.Context, fence job.Fence) (Counts, error) {
	r.runs <- fence
	return Counts{"done": 1}, r.err
}

func (r *recorder) ran(t *testing.T, why string) {
	t.Helper()
	select {
	case f := <-r.runs:
		require.Equal(t, job.Fence{Epoch: 7}, f, "a run is fenced by the term")
	case <-time.After(5 * time.Second):
		t.Fatalf("no run: %s", why)
	}
}

func (r *recorder) idle(t *testing.T, d time.Duration, why string) {
	t.Helper()
	select {
	case <-r.runs:
		t.Fatalf("a run: %s", why)
	case <-time.After(d):
	}
}

// Each service of the list runs at the start of the term when asked to, on each wake-up
// (a kick, a NOTIFY and the LISTEN's connection) and every period, each run recorded by
// service; a failing run is counted as an error and the service runs again; when the term
// ends Run returns with every loop stopped (goleak in TestMain).
func TestAMaintainerRunsEachServiceAtStartOnWakeAndEveryPeriodUntilTheTermEnds(t *testing.T) {
	t.Parallel()
	woken, listened, periodic := &recorder{runs: make(chan job.Fence, 10)}, &recorder{runs: make(chan job.Fence, 10)},
		&recorder{runs: make(chan job.Fence, 10), err: errors.New("boom")}
	wake, l, metrics := NewWake(), &fakeListener{notify: make(chan string)}, NewMetrics(nil)
	m := New(Config{Listener: l, Metrics: metrics, Logger: slog.New(slog.DiscardHandler)},
		Service{Name: "woken", Period: time.Hour, AtStart: true, Wake: wake, RunOnce: woken.runOnce},
		Service{Name: "listened", Period: time.Hour, Listen: "channel", RunOnce: listened.runOnce},
		Service{Name: "periodic", Period: 50 * time.Millisecond, RunOnce: periodic.runOnce},
	)
	ctx, cancel := context.WithCancel(t.Context())
	var (
		wg     sync.WaitGroup
		runErr error
	)
	wg.Go(func() { runErr = m.Run(ctx, 7) })

	woken.ran(t, "AtStart runs at once")
	woken.idle(t, 100*time.Millisecond, "no wake-up, and the period is an hour")
	wake.Kick()
	woken.ran(t, "a kick wakes it")

	listened.ran(t, "the LISTEN's connection wakes it")
	l.notify <- "payload"
	listened.ran(t, "a NOTIFY wakes it")

	periodic.ran(t, "the first period")
	periodic.ran(t, "the next period: a failed run is tried again")

	cancel()
	wg.Wait()
	require.NoError(t, runErr)
	require.InEpsilon(t, 2, value(metrics.runs.WithLabelValues("woken")), 0)
	require.Zero(t, value(metrics.errors.WithLabelValues("woken")))
	require.GreaterOrEqual(t, value(metrics.errors.WithLabelValues("periodic")), 2.0)
	require.InEpsilon(t, 2, value(metrics.counted.WithLabelValues("woken", "done")), 0)
}

func value(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}
