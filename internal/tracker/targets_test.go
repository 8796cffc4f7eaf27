package tracker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/synchronizer"
	"github.com/datajobs/datajobs/internal/testenv"
	"github.com/datajobs/datajobs/internal/tracker"
)

// runShard runs the synchronizer and the tracker of target t under a lease of its own, as
// serve's shard of that target does, until the end of the test.
func (f *fixture) runShard(t job.Target) {
	f.t.Helper()
	epoch, ok, err := f.db.TryAcquireLease(f.t.Context(), store.ShardLeaseName(t.Name), "test", time.Hour)
	require.NoError(f.t, err)
	require.True(f.t, ok)
	render := f.render
	render.Namespace = t.Namespace
	view := f.db.Target(t.Name)
	s := synchronizer.New(synchronizer.Config{
		Target: t.Name, Render: render, Settings: controller.Settings{Workers: 4, Interval: time.Hour},
		RetryBase: 50 * time.Millisecond, RetryMax: 500 * time.Millisecond,
	}, view, f.client, nil)
	x := tracker.New(tracker.Config{Namespace: t.Namespace, Settings: controller.Settings{Interval: time.Hour}, StartTimeout: time.Hour}, view, f.client)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.Run(ctx, epoch) })
	wg.Go(func() { _ = x.Run(ctx, epoch) })
	f.t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
}

// A manual run of a team whose execution target is another namespace (issue 44) is that
// target's: its row says so, that target's tracker makes its Job in that namespace and
// records it to the end, and the default target's tracker, running beside, makes none.
func TestARunOfATeamInAnotherTargetRunsInThatTargetsNamespace(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	const other, name = "team-b", "elsewhere-job"
	second := job.Target{Name: "second", Namespace: testenv.Namespace(t), DefaultFor: []string{other}}
	_, err := f.db.PutTarget(ctx, second)
	require.NoError(t, err)
	f.runShard(job.Target{Name: job.DefaultTargetName, Namespace: f.ns})
	f.runShard(second)

	_, err = f.svc.CreateJob(ctx, other, job.Job{Name: name, Team: other, Schedule: "0 0 1 1 *"})
	require.NoError(t, err)
	_, err = f.svc.Deploy(ctx, other, name, job.DeploymentChange{JobVersion: ptr("v1")}, "alice")
	require.NoError(t, err)
	e, err := f.svc.StartExecution(ctx, other, name, service.ExecutionRequest{}, "alice", "op-elsewhere")
	require.NoError(t, err)

	require.Eventually(t, func() bool {
		got, err := f.svc.GetExecution(ctx, other, name, e.ID)
		require.NoError(t, err)
		return job.ExecutionStatus(got.Status).Final()
	}, 60*time.Second, 20*time.Millisecond, "the run ends")
	_, err = f.client.BatchV1().Jobs(second.Namespace).Get(ctx, e.ID, metav1.GetOptions{})
	require.NoError(t, err, "the run's Job is in the second target's namespace")
	jobs, err := f.client.BatchV1().Jobs(f.ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, jobs.Items, "no Job in the default target's namespace")
	conn, err := pgx.Connect(ctx, f.dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var target string
	require.NoError(t, conn.QueryRow(ctx, `SELECT target FROM data_job_execution WHERE id = $1`, e.ID).Scan(&target))
	require.Equal(t, second.Name, target)
}
