package store_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testenv"
)

// roundTrips counts what a store sends to PostgreSQL and waits for: a statement sent on
// its own, or a batch of them.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// A deployment change was eight round trips to PostgreSQL, one a statement (begin, lock,
// read, upsert, revision, generation, notify, commit), each paying the network's latency.
// It is three now: the BEGIN with the job's lock and read, the writes, the commit; and it
// still does all it did: the change is stored, recorded as a revision and heard by a
// listener.
func TestADeploymentChangeIsThreeRoundTrips(t *testing.T) {
	t.Parallel()
	url := testenv.DatabaseURL(t)
	var trips roundTrips
	st, err := store.Open(t.Context(), store.Config{URL: url, Tracer: &trips})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	ctx := t.Context()
	deployVersion(t, st, "trips", "v1")
	heard := make(chan string, 1)
	listening := make(chan struct{})
	listenCtx, stopListening := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() { stopListening(); wg.Wait() })
	wg.Go(func() {
		_ = st.Listen(listenCtx, store.DesiredChannel, func() { close(listening) }, func(name string) { heard <- name })
	})
	<-listening

	before := trips.n.Load()
	d, err := st.ChangeDeployment(ctx, "team-a", "trips", func(_ job.Job, cur *job.Deployment) (job.Deployment, error) {
		next := *cur
		next.JobVersion = "v2"
		return next, nil
	})
	require.NoError(t, err)
	require.Equal(t, int64(3), trips.n.Load()-before, "round trips of one change")

	require.Equal(t, "v2", d.JobVersion)
	require.Equal(t, job.StatusPending, d.Status)
	state, err := st.GetDeploymentState(ctx, "team-a", "trips")
	require.NoError(t, err)
	require.Equal(t, "v2", state.Desired.JobVersion)
	require.Equal(t, job.StatusPending, state.Desired.Status)
	revisions, err := st.Revisions(ctx, "team-a", "trips", 0, 10)
	require.NoError(t, err)
	require.Equal(t, job.RevisionDeploy, revisions.Revisions[0].Kind)
	require.Len(t, revisions.Revisions, 3, "create, the first deploy, this change")
	require.Equal(t, "trips", <-heard)

	_, err = st.ChangeDeployment(ctx, "team-a", "nobody", func(job.Job, *job.Deployment) (job.Deployment, error) {
		t.Fatal("a job that does not exist has no state to change")
		return job.Deployment{}, nil
	})
	require.Equal(t, job.KindNotFound, job.KindOf(err), "%v", err)
}

// Concurrent changes of one job apply one after the other, each on the result of the
// one before, now that the lock and the read travel together: the read still starts once
// the lock is held, with a snapshot that has what the lock waited for. With the read's
// snapshot taken before the wait, changes would be lost.
func TestConcurrentDeploymentChangesLoseNothing(t *testing.T) {
	t.Parallel()
	st, ctx, _ := openStore(t)
	deployVersion(t, st, "many", "v")
	const changes = 12
	var wg sync.WaitGroup
	errs := make(chan error, changes)
	for range changes {
		wg.Go(func() {
			_, err := st.ChangeDeployment(ctx, "team-a", "many", func(_ job.Job, cur *job.Deployment) (job.Deployment, error) {
				next := *cur
				next.JobVersion += "+"
				return next, nil
			})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	state, err := st.GetDeploymentState(ctx, "team-a", "many")
	require.NoError(t, err)
	require.Equal(t, "v"+strings.Repeat("+", changes), state.Desired.JobVersion)
	revisions, err := st.Revisions(ctx, "team-a", "many", 0, 100)
	require.NoError(t, err)
	require.Len(t, revisions.Revisions, changes+2, "create, the first deploy, every change")
}
