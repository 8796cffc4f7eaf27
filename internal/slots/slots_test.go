package slots_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/slots"
)

// uploads are slots of 2 and the registry of their metrics.
func uploads(perCaller int, wait time.Duration) (*slots.Slots, *prometheus.Registry) {
	reg := prometheus.NewRegistry()
	return slots.New(slots.Config{Kind: "uploads", What: "sources uploads", Flag: "--max", Limit: 2, CallerFlag: "--per-caller", PerCaller: perCaller},
		slots.Queue{Wait: wait, WaitFlag: "--admission-wait", Metrics: slots.NewMetrics(reg)}), reg
}

// waitingIs is a condition: n requests wait for a slot now.
func waitingIs(t *testing.T, reg *prometheus.Registry, n int) func() bool {
	return func() bool {
		families, err := reg.Gather()
		require.NoError(t, err)
		for _, f := range families {
			if f.GetName() == "datajobs_admission_queued_requests" {
				return f.GetMetric()[0].GetGauge().GetValue() == float64(n)
			}
		}
		return n == 0
	}
}

// acquireLater starts an Acquire and returns the channel of its outcome.
func acquireLater(s *slots.Slots, caller string) <-chan func() {
	out := make(chan func(), 1)
	go func() {
		release, err := s.Acquire(context.Background(), caller)
		if err != nil {
			release = nil
		}
		out <- release
	}()
	return out
}

func busyWhy(t *testing.T, err error) string {
	t.Helper()
	var de *job.Error
	require.ErrorAs(t, err, &de)
	require.Equal(t, job.KindBusy, de.Kind)
	return de.Why
}

// A caller that waits for its own share must not keep another caller out of a free
// slot: the queue is first come first served among those a slot may go to, and a freed
// share goes to that caller's oldest waiter.
func TestAWaiterHeldByItsOwnShareDoesNotBlockAnotherCaller(t *testing.T) {
	t.Parallel()
	s, reg := uploads(1, time.Minute)
	releaseA, err := s.Acquire(t.Context(), "a")
	require.NoError(t, err)
	secondA := acquireLater(s, "a") // waits for a's share
	require.Eventually(t, waitingIs(t, reg, 1), 10*time.Second, time.Millisecond)
	_, err = s.Acquire(t.Context(), "a")
	require.Contains(t, busyWhy(t, err), "of one caller at once (--per-caller)", "a third of a's finds a's share of the queue taken")

	releaseB, err := s.Acquire(t.Context(), "b")
	require.NoError(t, err, "b takes the free slot at once")
	releaseA()
	release := <-secondA
	require.NotNil(t, release, "a's waiter got the share a gave back")
	release()
	releaseB()
	releaseB() // twice is once
	r1, err := s.Acquire(t.Context(), "c")
	require.NoError(t, err)
	r2, err := s.Acquire(t.Context(), "d")
	require.NoError(t, err, "every slot is free again")
	r1()
	r2()
}

// Past the limit, as many may wait as may run; the next is refused at once, naming the
// bound and the full queue, and a waiter whose wait runs out is refused naming the wait.
func TestTheQueueIsBoundedAndTheWaitTooAndBothSaySo(t *testing.T) {
	t.Parallel()
	s, _ := uploads(2, 50*time.Millisecond)
	r1, err := s.Acquire(t.Context(), "a")
	require.NoError(t, err)
	r2, err := s.Acquire(t.Context(), "b")
	require.NoError(t, err)
	_, err = s.Acquire(t.Context(), "c")
	require.Contains(t, busyWhy(t, err), "This server runs at most 2 sources uploads at once (--max). It waited 50ms for one to end (--admission-wait).")

	held, reg := uploads(2, time.Minute)
	h1, err := held.Acquire(t.Context(), "a")
	require.NoError(t, err)
	h2, err := held.Acquire(t.Context(), "b")
	require.NoError(t, err)
	w1, w2 := acquireLater(held, "c"), acquireLater(held, "d")
	require.Eventually(t, waitingIs(t, reg, 2), 10*time.Second, time.Millisecond, "two wait: the queue is full")
	_, err = held.Acquire(t.Context(), "f")
	require.Contains(t, busyWhy(t, err), "As many as may wait for one (2, 2 of one caller) already did.")
	h1()
	h2()
	for _, w := range []<-chan func(){w1, w2} {
		release := <-w
		require.NotNil(t, release, "a waiter got a slot")
		release()
	}
	r1()
	r2()
}

// A negative wait refuses at once, as the slots did before the queue.
func TestANegativeWaitRefusesAtOnce(t *testing.T) {
	t.Parallel()
	s, _ := uploads(1, -1)
	r, err := s.Acquire(t.Context(), "a")
	require.NoError(t, err)
	defer r()
	_, err = s.Acquire(t.Context(), "a")
	require.Contains(t, busyWhy(t, err), "at most 1 sources uploads of one caller at once (--per-caller). No request waits for a slot (--admission-wait).")
}

// A waiter whose client goes away leaves the queue: its place is free for another.
func TestAWaiterWhoseClientLeftLeavesTheQueue(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	s := slots.New(slots.Config{What: "x", Limit: 1}, slots.Queue{Wait: time.Minute, Metrics: slots.NewMetrics(reg)})
	r, err := s.Acquire(t.Context(), "a")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	gone := make(chan error, 1)
	go func() { _, err := s.Acquire(ctx, "b"); gone <- err }()
	require.Eventually(t, waitingIs(t, reg, 1), 10*time.Second, time.Millisecond, "b waits")
	_, err = s.Acquire(t.Context(), "c")
	require.Error(t, err, "the queue of one is full")
	cancel()
	require.Error(t, <-gone)
	require.Eventually(t, waitingIs(t, reg, 0), 10*time.Second, time.Millisecond, "b left the queue")
	next := acquireLater(s, "d")
	require.Eventually(t, waitingIs(t, reg, 1), 10*time.Second, time.Millisecond, "d waits in b's place")
	r()
	release := <-next
	require.NotNil(t, release, "d took b's place and then the slot")
	release()
}
