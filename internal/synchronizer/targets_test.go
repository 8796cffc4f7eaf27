package synchronizer_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/synchronizer"
	"github.com/datajobs/datajobs/internal/testenv"
)

// shardOf runs, until the end of the test, the synchronizer shard of target t (its own
// lease, its view of the store, its namespace) beside the fixture's default one, and
// returns its metrics' registry.
func (f *fixture) shardOf(t job.Target) prometheus.Gatherer {
	f.t.Helper()
	return f.shardOn(t, f.db.Target(t.Name))
}

// shardOn is shardOf with the store db.
func (f *fixture) shardOn(t job.Target, db synchronizer.Store) prometheus.Gatherer {
	f.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	epoch, ok, err := f.db.TryAcquireLease(ctx, store.ShardLeaseName(t.Name), "test", time.Hour)
	require.NoError(f.t, err)
	require.True(f.t, ok)
	require.NotEqual(f.t, f.epoch, epoch, "two shards' terms share no epoch")
	render := f.render
	render.Namespace = t.Namespace
	reg := prometheus.NewRegistry()
	s := synchronizer.New(synchronizer.Config{
		Target: t.Name, Render: render, Settings: controller.Settings{Workers: 4, Interval: time.Hour},
		RetryBase: 50 * time.Millisecond, RetryMax: 500 * time.Millisecond, Metrics: synchronizer.NewMetrics(reg),
	}, db, f.client, nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Run(ctx, epoch)
	}()
	f.t.Cleanup(func() {
		cancel()
		<-done
	})
	return reg
}

// cronJobIn is the CronJob name in namespace ns, nil when there is none.
func (f *fixture) cronJobIn(ns, name string) (uid, jobUID string) {
	f.t.Helper()
	cj, err := f.client.BatchV1().CronJobs(ns).Get(f.t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", ""
	}
	require.NoError(f.t, err)
	return string(cj.UID), cj.Labels[kube.LabelJobUID]
}

// actualTarget is the target of the job name's actual row ("" without one).
func (f *fixture) actualTarget(name string) string {
	f.t.Helper()
	conn, err := pgx.Connect(f.t.Context(), f.dbURL)
	require.NoError(f.t, err)
	defer conn.Close(context.Background())
	var target string
	err = conn.QueryRow(f.t.Context(), `SELECT coalesce((SELECT target FROM actual_data_job_deployment WHERE data_job_name = $1), '')`, name).Scan(&target)
	require.NoError(f.t, err)
	return target
}

// newWithTarget is a fixture with the execution target second, whose default shard runs.
func newWithTarget(t *testing.T, second job.Target) *fixture {
	t.Helper()
	f := newFixture(t)
	_, err := f.db.PutTarget(t.Context(), second)
	require.NoError(t, err)
	f.start()
	return f
}

// mover is the job of team moverTeam that newTwoTargets deploys beside "stays-put" of team.
const mover, moverTeam = "mover-job", "team-b"

// newTwoTargets is a fixture whose default target's shard and a second target's (no team
// its default yet) run, with the jobs stays-put and mover deployed and synced, both in
// the default target.
func newTwoTargets(t *testing.T) (*fixture, job.Target) {
	t.Helper()
	second := job.Target{Name: "second", Namespace: testenv.Namespace(t)}
	f := newWithTarget(t, second)
	f.shardOf(second)
	f.deployStaysPutAndMover()
	f.synced("stays-put")
	f.synced(mover)
	return f, second
}

// deployStaysPutAndMover creates and deploys the jobs stays-put of team and mover of
// moverTeam.
func (f *fixture) deployStaysPutAndMover() {
	f.t.Helper()
	f.createJob("stays-put")
	f.deploy("stays-put", job.DeploymentChange{JobVersion: ptr("v1")})
	_, err := f.svc.CreateJob(f.t.Context(), moverTeam, job.Job{Name: mover, Team: moverTeam, Schedule: "*/5 * * * *"})
	require.NoError(f.t, err)
	_, err = f.svc.Deploy(f.t.Context(), moverTeam, mover, job.DeploymentChange{JobVersion: ptr("v1")}, "alice")
	require.NoError(f.t, err)
}

// A team moved to another execution target (issue 44): its CronJob is created in the new
// target's namespace by that target's shard and deleted from the old one by the old
// target's shard, a delete the database asks for (not an orphan the prune guard holds
// back), and the other team's CronJob is not touched. Moved back, nothing is left in the
// second namespace.
func TestATeamMovedBetweenTargetsMovesItsCronJobsAndLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	f, second := newTwoTargets(t)
	ctx := t.Context()
	stays, _ := f.cronJobIn(f.ns, "stays-put")
	first, moverUID := f.cronJobIn(f.ns, mover)
	require.NotEmpty(t, first)
	require.Equal(t, job.DefaultTargetName, f.actualTarget(mover))

	second.DefaultFor = []string{moverTeam}
	_, err := f.db.PutTarget(ctx, second)
	require.NoError(t, err)
	f.eventually(func() bool {
		old, _ := f.cronJobIn(f.ns, mover)
		moved, uid := f.cronJobIn(second.Namespace, mover)
		return old == "" && moved != "" && uid == moverUID && f.actualTarget(mover) == second.Name
	}, "the mover's CronJob in the second target's namespace only, recorded there")
	now, _ := f.cronJobIn(f.ns, "stays-put")
	require.Equal(t, stays, now, "the other team's CronJob is the same object")

	second.DefaultFor = nil
	_, err = f.db.PutTarget(ctx, second)
	require.NoError(t, err)
	f.eventually(func() bool {
		back, _ := f.cronJobIn(f.ns, mover)
		left, _ := f.cronJobIn(second.Namespace, mover)
		return back != "" && left == "" && f.actualTarget(mover) == job.DefaultTargetName
	}, "the mover's CronJob back in the default namespace, none left in the second")
	list, err := f.client.BatchV1().CronJobs(second.Namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, list.Items, "nothing left behind in the second target")
}

// A team moved while the old target's shard was down: the new shard created and recorded
// the CronJob, so the old shard's first full pass finds its own CronJob of the job with
// neither the job (its team's target is another) nor an actual row (the new shard's);
// without the other targets' jobs in the full read it was an orphan, which the prune guard
// held back (1 of 2 CronJobs), and it stayed in the old namespace.
func TestAShardDownDuringAMoveDeletesItsCronJobWhenItComesBack(t *testing.T) {
	t.Parallel()
	f, second := newTwoTargets(t)
	ctx := t.Context()

	f.stop()
	second.DefaultFor = []string{moverTeam}
	_, err := f.db.PutTarget(ctx, second)
	require.NoError(t, err)
	f.eventually(func() bool {
		moved, _ := f.cronJobIn(second.Namespace, mover)
		return moved != "" && f.actualTarget(mover) == second.Name
	}, "the mover's CronJob created and recorded in the second target")
	left, _ := f.cronJobIn(f.ns, mover)
	require.NotEmpty(t, left, "the default shard is down: its CronJob is still there")

	f.start()
	f.eventually(func() bool {
		old, _ := f.cronJobIn(f.ns, mover)
		return old == ""
	}, "the default shard deletes its CronJob of the moved job")
	kept, _ := f.cronJobIn(f.ns, "stays-put")
	require.NotEmpty(t, kept)
}

// A deployment that names an execution target (issue 44) has its CronJob in that target's
// namespace while its team's other jobs stay in the default one; named back to its team's
// default, the CronJob moves back and nothing is left in the named target.
func TestADeploymentNamingATargetRunsThereAndComesBack(t *testing.T) {
	t.Parallel()
	second := job.Target{Name: "second", Namespace: testenv.Namespace(t), Teams: []string{team}}
	f := newWithTarget(t, second)
	f.shardOf(second)
	f.createJob("stays-put")
	f.deploy("stays-put", job.DeploymentChange{JobVersion: ptr("v1")})
	f.createJob("named-job")
	f.deploy("named-job", job.DeploymentChange{JobVersion: ptr("v1"), ExecutionTarget: ptr(second.Name)})
	f.eventually(func() bool {
		there, _ := f.cronJobIn(second.Namespace, "named-job")
		here, _ := f.cronJobIn(f.ns, "stays-put")
		return there != "" && here != "" && f.actualTarget("named-job") == second.Name
	}, "the named job in the second target, the other here")
	here, _ := f.cronJobIn(f.ns, "named-job")
	require.Empty(t, here)

	f.patch("named-job", job.DeploymentChange{ExecutionTarget: ptr("")})
	f.eventually(func() bool {
		back, _ := f.cronJobIn(f.ns, "named-job")
		left, _ := f.cronJobIn(second.Namespace, "named-job")
		return back != "" && left == "" && f.actualTarget("named-job") == job.DefaultTargetName
	}, "the job back in its team's default target, none left in the second")
}

// A shard's full pass plans its own target's jobs and the CronJobs of its namespace. Its
// read also returns every job of the other targets, to tell a moved team's CronJob left
// in this namespace from an orphan; the shard kept and planned them all, so that its
// datajobs_sync_planned_jobs counted the other targets' jobs as its own (2 here, with 1
// job of its own) and every replica held them all (docs/benchmarks.md, "Execution
// targets").
func TestAShardPlansOnlyItsOwnTargetsJobs(t *testing.T) {
	t.Parallel()
	second := job.Target{Name: "second", Namespace: testenv.Namespace(t), DefaultFor: []string{moverTeam}}
	f := newWithTarget(t, second)
	f.deployStaysPutAndMover()
	f.synced("stays-put")

	reg := f.shardOf(second)
	f.eventually(func() bool { return f.actualTarget(mover) == second.Name }, "the mover's CronJob recorded in the second target")
	f.eventually(func() bool { return gathered(t, reg, "datajobs_sync_passes_total") >= 1 }, "the second shard's first pass")
	require.Equal(t, 1, int(gathered(t, reg, "datajobs_sync_planned_jobs")), "the second shard's jobs planned: its own one")
}
