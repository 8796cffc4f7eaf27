package controller

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/datajobs/datajobs/internal/metric"
	"github.com/datajobs/datajobs/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// loopFixture runs one queue on Run, as every stage of the leader does.
type loopFixture struct {
	q       *Queue
	m       *Metrics
	logs    *testenv.LogBuffer
	stopped chan struct{}
}

func runLoop(t *testing.T, reconcile func(context.Context, string) (Result, error)) *loopFixture {
	t.Helper()
	f := &loopFixture{
		m:       NewMetrics(metric.On(nil), "test", "execution", "Keys"),
		logs:    &testenv.LogBuffer{},
		stopped: make(chan struct{}),
	}
	log := slog.New(slog.NewJSONHandler(f.logs, nil))
	f.q = NewQueue(f.m, Exponential(time.Millisecond, 10*time.Millisecond), log, "execution", "execution_sync_failed")
	go func() {
		defer close(f.stopped)
		Run(t.Context(), f.q, 2, reconcile)
	}()
	t.Cleanup(func() {
		f.q.ShutDown()
		<-f.stopped
	})
	return f
}

func (f *loopFixture) results(r string) float64 { return counterValue(f.m.results.WithLabelValues(r)) }

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

// Issue 22: a panic in an execution (or build) worker must not kill the leader, and the
// execution it panicked on must not be dropped: it is recovered, logged with the
// execution, counted, and retried with backoff until it succeeds.
func TestAPanicInAWorkerIsRecoveredLoggedCountedAndRetried(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	f := runLoop(t, func(context.Context, string) (Result, error) {
		if calls.Add(1) == 1 {
			panic("injected fault: the reconcile panics")
		}
		return Result{}, nil
	})
	f.q.Add("exec-1")
	require.Eventually(t, func() bool { return f.results("success") == 1 }, 10*time.Second, time.Millisecond)
	require.Equal(t, int32(2), calls.Load(), "retried once after the panic")
	require.InDelta(t, 1, counterValue(f.m.panics), 0)
	require.InDelta(t, 1, f.results("error"), 0, "the panic counts as a failed reconcile")
	require.Contains(t, f.logs.String(), `"msg":"execution_panic","execution":"exec-1"`)
}

// A terminal result (a hold, a conflict, a user error) is not retried: only a change can
// help, and retrying it would spin. It is counted apart from successes and errors.
func TestATerminalResultIsNotRetriedAndIsCountedApart(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	f := runLoop(t, func(context.Context, string) (Result, error) {
		calls.Add(1)
		return Result{Terminal: true}, nil
	})
	f.q.Add("job-a")
	require.Eventually(t, func() bool { return f.results("terminal") == 1 }, 10*time.Second, time.Millisecond)
	require.Zero(t, f.q.NumRequeues("job-a"), "no backoff planned")
	require.Zero(t, f.q.Len(), "nothing queued again")
	require.Equal(t, int32(1), calls.Load())
}

// An error is retried with the key's backoff and logged with the key; once it succeeds
// its backoff is forgotten, so the next failure starts from the base delay again.
func TestAnErrorIsRetriedWithBackoffAndForgottenOnSuccess(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	f := runLoop(t, func(context.Context, string) (Result, error) {
		if calls.Add(1) <= 2 {
			return Result{}, errors.New("injected fault: the database is down")
		}
		return Result{}, nil
	})
	f.q.Add("exec-2")
	require.Eventually(t, func() bool { return f.results("success") == 1 }, 10*time.Second, time.Millisecond)
	require.InDelta(t, 2, f.results("error"), 0)
	require.Zero(t, f.q.NumRequeues("exec-2"), "the backoff is forgotten after the success")
	require.Contains(t, f.logs.String(), `"msg":"execution_sync_failed","execution":"exec-2"`)
}

// A requeue-after looks at the key again without an event (a grace period that ends).
func TestARequeueAfterLooksAgainWithoutAnEvent(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	f := runLoop(t, func(context.Context, string) (Result, error) {
		if calls.Add(1) == 1 {
			return Result{RequeueAfter: time.Millisecond}, nil
		}
		return Result{}, nil
	})
	f.q.Add("exec-3")
	require.Eventually(t, func() bool { return f.results("success") == 1 }, 10*time.Second, time.Millisecond)
	require.InDelta(t, 1, f.results("requeue_after"), 0)
	require.Equal(t, int32(2), calls.Load())
}
