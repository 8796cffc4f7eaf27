package leader_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/leader"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testenv"
)

const (
	lease = "synchronizer"
	// wait bounds how long a test waits for something that takes a few retry intervals.
	wait = 30 * time.Second
	tick = 5 * time.Millisecond
)

// fast timings keep the tests short; the lease lasts long enough that only a release, not
// an expiry, can hand it over within wait.
var fast = leader.Config{
	Name:          lease,
	LeaseDuration: time.Hour,
	// Also the release's time limit: 50 ms was too short for a loaded machine, and a
	// release that times out leaves the hour-long lease to the next test's wait.
	RenewInterval: time.Second,
	RenewDeadline: 30 * time.Minute,
	RetryInterval: 50 * time.Millisecond,
}

func TestNew(t *testing.T) {
	t.Parallel()
	var leases leader.Leases = &faultyLeases{}

	t.Run("defaults are client-go's timings and a unique identity", func(t *testing.T) {
		t.Parallel()
		a, err := leader.New(leader.Config{Name: lease}, leases)
		require.NoError(t, err)
		b, err := leader.New(leader.Config{Name: lease}, leases)
		require.NoError(t, err)
		require.NotEqual(t, a.Identity(), b.Identity())
		require.False(t, a.IsLeader())
		require.Zero(t, a.Epoch())
	})

	t.Run("a lease duration alone is enough: the other durations scale with it", func(t *testing.T) {
		t.Parallel()
		for _, d := range []time.Duration{time.Second, 5 * time.Second, time.Minute} {
			_, err := leader.New(leader.Config{Name: lease, LeaseDuration: d}, leases)
			require.NoError(t, err)
		}
	})

	for _, tc := range []struct {
		behaviour string
		cfg       leader.Config
	}{
		{"a lease name is required", leader.Config{}},
		{"the renew deadline must be shorter than the lease", leader.Config{Name: lease, LeaseDuration: time.Second, RenewDeadline: time.Second, RenewInterval: time.Millisecond}},
		{"renewals must come before the renew deadline", leader.Config{Name: lease, RenewInterval: 7 * time.Second}},
		{"a renew deadline longer than the lease is refused", leader.Config{Name: lease, LeaseDuration: 5 * time.Second, RenewDeadline: 7 * time.Second}},
		{"intervals must be positive", leader.Config{Name: lease, RetryInterval: -time.Second}},
	} {
		t.Run(tc.behaviour, func(t *testing.T) {
			t.Parallel()
			_, err := leader.New(tc.cfg, leases)
			require.Error(t, err)
		})
	}
}

func TestOneLeaderAtATime(t *testing.T) {
	t.Parallel()
	s := testenv.Store(t)
	var active, most atomic.Int32
	lead := func(ctx context.Context, _ int64) {
		n := active.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-ctx.Done()
		active.Add(-1)
	}
	a, b := &faultyLeases{Leases: s}, &faultyLeases{Leases: s}
	ea := newElector(t, fast, a)
	eb := newElector(t, fast, b)
	run(t, ea, lead)
	run(t, eb, lead)

	// Wait until one leads and the other has been refused a few times.
	require.Eventually(t, func() bool { return a.refused.Load()+b.refused.Load() >= 5 }, wait, tick)
	require.Equal(t, int32(1), most.Load(), "two leaders at once")
	require.NotEqual(t, ea.IsLeader(), eb.IsLeader())
	leaderOf := ea
	if eb.IsLeader() {
		leaderOf = eb
	}
	holder, epoch, _, err := s.LeaseHolder(t.Context(), lease)
	require.NoError(t, err)
	require.Equal(t, leaderOf.Identity(), holder)
	require.Equal(t, leaderOf.Epoch(), epoch)
}

// A graceful shutdown releases the lease, so the next replica takes over at its next
// attempt: the lease lasts an hour, so nothing else can hand it over within the test.
// Epochs grow with every handover.
func TestShutdownHandsOverAtOnce(t *testing.T) {
	t.Parallel()
	s := testenv.Store(t)
	reg := prometheus.NewRegistry()
	metrics := leader.NewMetrics(reg)
	cfg := fast
	cfg.Metrics = metrics

	var epochs []int64
	var prev *leader.Elector
	var prevCancel context.CancelFunc
	var prevDone <-chan error
	for range 3 {
		e := newElector(t, cfg, s)
		started := make(chan int64, 1)
		cancel, done := run(t, e, func(ctx context.Context, epoch int64) {
			started <- epoch
			<-ctx.Done()
		})
		if prev != nil {
			require.True(t, prev.IsLeader())
			prevCancel()
			require.NoError(t, <-prevDone)
			require.False(t, prev.IsLeader())
		}
		epoch := <-started
		require.Eventually(t, e.IsLeader, wait, tick)
		require.Equal(t, epoch, e.Epoch())
		epochs = append(epochs, epoch)
		prev, prevCancel, prevDone = e, cancel, done
	}
	require.Less(t, epochs[0], epochs[1])
	require.Less(t, epochs[1], epochs[2])

	require.InDelta(t, 1, metricValue(t, reg, "datajobs_leader_is_leader"), 0)
	require.InDelta(t, float64(epochs[2]), metricValue(t, reg, "datajobs_leader_epoch"), 0)
	// Three replicas started leading and two stopped.
	require.InDelta(t, 5, metricValue(t, reg, "datajobs_leader_transitions_total"), 0)

	prevCancel()
	require.NoError(t, <-prevDone)
	_, _, expires, err := s.LeaseHolder(t.Context(), lease)
	require.NoError(t, err)
	held, err := testenv.HoldsLease(t.Context(), s, lease, epochs[2])
	require.NoError(t, err)
	require.False(t, held, "released at shutdown (expires at %s)", expires)
	require.InDelta(t, 0, metricValue(t, reg, "datajobs_leader_is_leader"), 0)
}

// A leader cut off from the database (as good as killed, for the others) stops its work
// while its lease is still valid, and the other replica takes over only once the lease
// has expired, in a later term.
func TestCutOffLeaderStopsBeforeItsLeaseExpires(t *testing.T) {
	t.Parallel()
	s := testenv.Store(t)
	cfg := leader.Config{
		Name:          lease,
		LeaseDuration: 3 * time.Second,
		RenewInterval: 50 * time.Millisecond,
		RenewDeadline: time.Second,
		RetryInterval: 50 * time.Millisecond,
	}
	var events []string
	var mu sync.Mutex
	record := func(ev string) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, ev)
	}

	cut := &faultyLeases{Leases: s}
	a := newElector(t, cfg, cut)
	aEpoch := make(chan int64, 1)
	heldAtStop := make(chan bool, 1)
	run(t, a, func(ctx context.Context, epoch int64) {
		aEpoch <- epoch
		<-ctx.Done()
		record("a stopped")
		// Ask the database directly, not through the cut-off connection.
		held, err := testenv.HoldsLease(context.WithoutCancel(ctx), s, lease, epoch)
		assert.NoError(t, err)
		heldAtStop <- held
	})
	old := <-aEpoch

	others := &faultyLeases{Leases: s}
	b := newElector(t, cfg, others)
	bEpoch := make(chan int64, 1)
	run(t, b, func(ctx context.Context, epoch int64) {
		record("b started")
		bEpoch <- epoch
		<-ctx.Done()
	})
	require.Eventually(t, func() bool { return others.refused.Load() > 0 }, wait, tick)

	cut.fail.Store(true)
	require.True(t, <-heldAtStop, "a stopped only after its lease expired")
	epoch := <-bEpoch
	require.Greater(t, epoch, old)
	mu.Lock()
	require.Equal(t, []string{"a stopped", "b started"}, events)
	mu.Unlock()
	held, err := testenv.HoldsLease(t.Context(), s, lease, old)
	require.NoError(t, err)
	require.False(t, held)
	require.False(t, a.IsLeader())
}

// A crashed leader (cut off, so it never renews nor releases) is replaced at its lease's
// expiry, not a retry interval later: the follower's retry interval here is an hour, so
// before the follower slept until the holder's expiry this test waited an hour (the
// failover benchmark lost up to 2 s of the default 2 s interval after the expiry).
func TestACrashedLeaderIsReplacedAtItsLeasesExpiry(t *testing.T) {
	t.Parallel()
	s := testenv.Store(t)
	cfg := leader.Config{
		Name:          lease,
		LeaseDuration: 2 * time.Second,
		RenewInterval: 50 * time.Millisecond,
		RenewDeadline: time.Second,
		RetryInterval: time.Hour,
	}
	cut := &faultyLeases{Leases: s}
	a := newElector(t, cfg, cut)
	aEpoch := make(chan int64, 1)
	run(t, a, func(ctx context.Context, epoch int64) {
		aEpoch <- epoch
		<-ctx.Done()
	})
	old := <-aEpoch
	others := &faultyLeases{Leases: s}
	b := newElector(t, cfg, others)
	bEpoch := make(chan int64, 1)
	run(t, b, func(ctx context.Context, epoch int64) {
		bEpoch <- epoch
		<-ctx.Done()
	})
	require.Eventually(t, func() bool { return others.refused.Load() > 0 }, wait, tick)
	cut.fail.Store(true) // a crashes: no renewal, no release

	select {
	case epoch := <-bEpoch:
		require.Greater(t, epoch, old)
	case <-time.After(wait):
		t.Fatalf("b did not take the lease within %s of a's crash (lease %s, retry interval %s)", wait, cfg.LeaseDuration, cfg.RetryInterval)
	}
}

// A lead that returns on its own ends the term: the lease is released for the others.
func TestLeadReturningEndsTheTerm(t *testing.T) {
	t.Parallel()
	s := testenv.Store(t)
	cfg := fast
	cfg.RetryInterval = time.Hour // a does not campaign again within the test
	a := newElector(t, cfg, s)
	aEpoch := make(chan int64, 1)
	run(t, a, func(_ context.Context, epoch int64) { aEpoch <- epoch })
	old := <-aEpoch

	b := newElector(t, fast, s)
	bEpoch := make(chan int64, 1)
	run(t, b, func(ctx context.Context, epoch int64) {
		bEpoch <- epoch
		<-ctx.Done()
	})
	require.Greater(t, <-bEpoch, old)
	require.False(t, a.IsLeader())
}

// A renewal that finds the term over (the lease was taken meanwhile) stops the work at
// once, and the replica campaigns again.
func TestLostLeaseStopsTheWork(t *testing.T) {
	t.Parallel()
	s := testenv.Store(t)
	leases := &faultyLeases{Leases: s}
	e := newElector(t, fast, leases)
	epochs := make(chan int64, 2)
	run(t, e, func(ctx context.Context, epoch int64) {
		epochs <- epoch
		<-ctx.Done()
	})
	first := <-epochs
	// Someone ends the term behind the elector's back (an operator, or an expiry).
	require.NoError(t, s.ReleaseLease(t.Context(), lease, e.Identity(), first))
	second := <-epochs
	require.Greater(t, second, first)
}

// newElector returns an elector logging to the test.
func newElector(t *testing.T, cfg leader.Config, leases leader.Leases) *leader.Elector {
	t.Helper()
	cfg.Logger = slog.New(slog.NewTextHandler(tWriter{t}, nil))
	e, err := leader.New(cfg, leases)
	require.NoError(t, err)
	return e
}

// run starts e.Run in a goroutine owned by the test: it ends and is waited for at
// cleanup at the latest. done yields Run's result.
func run(t *testing.T, e *leader.Elector, lead func(context.Context, int64)) (cancel context.CancelFunc, done <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	result := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() { result <- e.Run(ctx, lead) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return cancel, result
}

// faultyLeases passes calls to the store, counts refusals, and fails every call once
// fail is set, as if this replica were cut off from the database.
type faultyLeases struct {
	leader.Leases
	fail    atomic.Bool
	refused atomic.Int64
}

var errCutOff = errors.New("cut off from the database")

func (f *faultyLeases) TryAcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (int64, bool, error) {
	if f.fail.Load() {
		return 0, false, errCutOff
	}
	epoch, ok, err := f.Leases.TryAcquireLease(ctx, name, holder, ttl)
	if err == nil && !ok {
		f.refused.Add(1)
	}
	return epoch, ok, err
}

func (f *faultyLeases) RenewLease(ctx context.Context, name, holder string, epoch int64, ttl time.Duration) (bool, error) {
	if f.fail.Load() {
		return false, errCutOff
	}
	return f.Leases.RenewLease(ctx, name, holder, epoch, ttl)
}

func (f *faultyLeases) ReleaseLease(ctx context.Context, name, holder string, epoch int64) error {
	if f.fail.Load() {
		return errCutOff
	}
	return f.Leases.ReleaseLease(ctx, name, holder, epoch)
}

// metricValue reads the value of a metric as /metrics would show it, for this lease.
func metricValue(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	families, err := g.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "lease" && l.GetValue() == lease {
					return m.GetGauge().GetValue() + m.GetCounter().GetValue()
				}
			}
		}
	}
	require.Failf(t, "metric not found", "%s{lease=%q}", name, lease)
	return 0
}

// tWriter sends log lines to the test's log.
type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p[:len(p)-1]))
	return len(p), nil
}

var _ leader.Leases = (*store.Store)(nil)

// Check refuses a leader's writes once its lease may have passed to another replica, by
// the renewer's in-memory deadline alone: a context detached from the term's cancellation
// (as a write already past its ctx check is, in effect, when the process is paused) is
// refused all the same.
func TestCheckRefusesWritesOnceTheTermMayBeOver(t *testing.T) {
	t.Parallel()
	require.NoError(t, leader.Check(t.Context()), "no term asked for: nothing to check")
	s := testenv.Store(t)
	cfg := leader.Config{
		Name:          lease,
		LeaseDuration: 3 * time.Second,
		RenewInterval: 50 * time.Millisecond,
		RenewDeadline: time.Second,
		RetryInterval: 50 * time.Millisecond,
	}
	cut := &faultyLeases{Leases: s}
	a := newElector(t, cfg, cut)
	during, after := make(chan error, 1), make(chan error, 1)
	run(t, a, func(ctx context.Context, _ int64) {
		during <- leader.Check(ctx)
		detached := context.WithoutCancel(ctx)
		cut.fail.Store(true) // renewals fail from now on
		<-ctx.Done()
		after <- leader.Check(detached)
	})
	require.NoError(t, <-during)
	require.ErrorIs(t, <-after, leader.ErrTermOver)
}
