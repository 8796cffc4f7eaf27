package tracker_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/testenv"
	"github.com/datajobs/datajobs/internal/tracker"
)

// heldCreates is a RoundTripper that holds every create of a Job until release is
// closed, counting those held: an apiserver slow to answer creates, injected.
type heldCreates struct {
	rt      http.RoundTripper
	release chan struct{}

	mu   sync.Mutex
	held int
}

func (h *heldCreates) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/jobs") {
		h.mu.Lock()
		h.held++
		h.mu.Unlock()
		select {
		case <-h.release:
		case <-req.Context().Done():
		}
	}
	return h.rt.RoundTrip(req)
}

func (h *heldCreates) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held
}

// wrappedClient returns a client (the service's rate limits) whose requests go through
// wrap (a RoundTripper of the test's around the client's own).
func wrappedClient(t *testing.T, wrap func(http.RoundTripper) http.RoundTripper) kubernetes.Interface {
	t.Helper()
	rc := testenv.RestConfig(t)
	rc.QPS, rc.Burst = 50, 100
	rc.Wrap(wrap)
	cs, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)
	return cs
}

// Starts do not wait for each other's slow creates: 96 manual starts of a job (concurrency
// Allow) whose Job creates the apiserver holds are all in flight at once with the
// tracker's default workers, and each gets its Job once the creates go through. A start
// holds its worker for its round trips: with 16 workers 100 starts a second outran them
// (bench/triggers, issue 42: run committed -> Job seen p50 27 s, the queue's mean wait
// 24 s); with 64, the statuses' writes beside the starts kept all busy on a loaded machine
// (the queue's mean wait 1.6-10 s).
func TestStartsWaitingForASlowApiserverAreAllInFlightAtOnce(t *testing.T) {
	const n = 96 // more than 64, within a team's bound of 100 active manual executions
	f := newExecFixture(t)
	j := f.createJob("many-starts")
	allow := "Allow"
	f.deploy(j.Name, job.DeploymentChange{JobVersion: ptr("v1"), Policy: job.PolicyChange{ConcurrencyPolicy: &allow}})
	f.heldCronJob(j)

	h := &heldCreates{release: make(chan struct{})}
	released := sync.OnceFunc(func() { close(h.release) })
	defer released()
	x := tracker.New(tracker.Config{Namespace: f.ns, Settings: controller.Settings{Interval: time.Hour}, StartTimeout: time.Hour}, f.db, wrappedClient(t, func(rt http.RoundTripper) http.RoundTripper { h.rt = rt; return h }))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = x.Run(ctx, f.epoch) })
	defer func() {
		released()
		cancel()
		wg.Wait()
	}()

	ids := make([]string, n)
	for i := range n {
		ids[i] = f.run(j.Name, "")
	}
	require.Eventually(t, func() bool { return h.count() == n }, time.Minute, 10*time.Millisecond,
		"every start's create in flight at once")
	released()
	for _, id := range ids {
		f.job(id)
	}
	require.Equal(t, n, h.count(), "one create a start")
}
