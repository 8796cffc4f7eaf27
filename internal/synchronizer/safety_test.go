package synchronizer_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/synchronizer"
	"github.com/datajobs/datajobs/internal/testenv"
)

// deployed creates and deploys the named jobs and waits until each has its CronJob.
func (f *fixture) deployed(names ...string) map[string]*batchv1.CronJob {
	f.t.Helper()
	for _, n := range names {
		f.createJob(n)
		f.deploy(n, job.DeploymentChange{JobVersion: ptr("v1")})
	}
	f.start()
	out := map[string]*batchv1.CronJob{}
	for _, n := range names {
		f.synced(n)
		out[n] = f.cronJob(n)
	}
	f.stop()
	return out
}

// unchanged asserts that every CronJob is still there, its spec, labels and annotations
// not written since. Not its resourceVersion: the CronJob controller writes the status
// whenever the schedule (createJob's */5) fires and its Job ends, so a test that crossed
// a :x0 or :x5 boundary failed "written" with nothing of datajobs' changed.
func (f *fixture) unchanged(before map[string]*batchv1.CronJob) {
	f.t.Helper()
	for name, cj := range before {
		now := f.cronJob(name)
		require.NotNil(f.t, now, "%s deleted", name)
		require.Equal(f.t, cj.UID, now.UID, "%s replaced", name)
		require.Equal(f.t, cj.Generation, now.Generation, "%s spec written", name)
		require.Equal(f.t, cj.Spec, now.Spec, "%s spec written", name)
		require.Equal(f.t, cj.Labels, now.Labels, "%s labels written", name)
		require.Equal(f.t, cj.Annotations, now.Annotations, "%s annotations written", name)
	}
}

func TestEveryCronJobCarriesItsInstallation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cj := f.deployed("labelled")["labelled"]
	id, err := f.db.InstallationID(t.Context())
	require.NoError(t, err)
	require.NotEmpty(t, id)
	require.Equal(t, id, cj.Labels[kube.LabelInstallation])
	require.Equal(t, id, cj.Spec.JobTemplate.Labels[kube.LabelInstallation], "and so every Job it creates")
	require.Equal(t, id, cj.Spec.JobTemplate.Spec.Template.Labels[kube.LabelInstallation], "and their Pods")
}

func TestServicePointedAtAnEmptyDatabaseDeletesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	before := f.deployed("kept-one", "kept-two", "kept-three")

	t.Run("a fresh database is another installation", func(t *testing.T) {
		fresh := newFixtureIn(t, f.ns)
		fresh.newInstallation()
		rep, err := fresh.synchronizer(false).RunOnce(t.Context(), fresh.epoch)
		require.NoError(t, err)
		require.Empty(t, rep.Errors)
		require.Empty(t, rep.Plans, "another installation's CronJobs are not even planned for")
		require.Nil(t, rep.PruneRefusal)
		f.unchanged(before)
	})

	t.Run("the installation's own database, emptied, deletes nothing either", func(t *testing.T) {
		// A restore of an empty backup, or a truncate by mistake: the installation is the
		// same, every CronJob an orphan.
		f.exec(`DELETE FROM actual_data_job_deployment; DELETE FROM data_job`)
		s := f.synchronizer(false)
		rep, err := s.RunOnce(t.Context(), f.epoch)
		require.NoError(t, err)
		require.Equal(t, 3, rep.Summary()[synchronizer.ActionKeep], "plans: %v", rep.Plans)
		require.NotNil(t, rep.PruneRefusal)
		require.Equal(t, 3, rep.PruneRefusal.Orphans)
		require.Contains(t, rep.PruneRefusal.Reason, "no data job")
		require.Equal(t, rep.PruneRefusal, s.PruneRefusal(), "shown in the health detail")
		f.unchanged(before)

		// The operator who means it says so.
		rep, err = f.synchronizerWith(synchronizer.Config{AllowMassPrune: true}).RunOnce(t.Context(), f.epoch)
		require.NoError(t, err)
		require.Empty(t, rep.Errors)
		require.Nil(t, rep.PruneRefusal)
		require.Equal(t, 3, rep.Summary()[synchronizer.ActionOrphan])
		for name := range before {
			f.eventually(func() bool { return f.cronJob(name) == nil }, name+" pruned")
		}
	})
}

func TestPruneWithinTheFractionDeletesTheOrphan(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	names := []string{"job-one", "job-two", "job-three", "job-four", "job-five", "job-six"}
	before := f.deployed(names...)
	// One row lost (a partial restore): one orphan of six CronJobs is within 0.2.
	f.exec(`DELETE FROM actual_data_job_deployment WHERE data_job_name = 'job-six'; DELETE FROM data_job WHERE name = 'job-six'`)
	rep, err := f.synchronizer(false).RunOnce(t.Context(), f.epoch)
	require.NoError(t, err)
	require.Nil(t, rep.PruneRefusal)
	require.Equal(t, 1, rep.Summary()[synchronizer.ActionOrphan])
	f.eventually(func() bool { return f.cronJob("job-six") == nil }, "the one orphan pruned")
	delete(before, "job-six")
	f.unchanged(before)

	// Two more lost: two of five is above 0.2, and both stay.
	f.exec(`DELETE FROM actual_data_job_deployment WHERE data_job_name IN ('job-four', 'job-five'); DELETE FROM data_job WHERE name IN ('job-four', 'job-five')`)
	rep, err = f.synchronizer(false).RunOnce(t.Context(), f.epoch)
	require.NoError(t, err)
	require.NotNil(t, rep.PruneRefusal)
	require.Equal(t, 2, rep.Summary()[synchronizer.ActionKeep])
	f.unchanged(before)
}

func TestDeletesTheDatabaseAskedForAreNeverHeldBack(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.deployed("gone-a", "gone-b", "gone-c")
	// Every job deleted through the API: their actual rows remain until their CronJobs
	// are gone, so these are deletes the database asks for, not orphans.
	for _, n := range []string{"gone-a", "gone-b", "gone-c"} {
		require.NoError(t, f.svc.DeleteJob(t.Context(), team, n))
	}
	rep, err := f.synchronizer(false).RunOnce(t.Context(), f.epoch)
	require.NoError(t, err)
	require.Nil(t, rep.PruneRefusal)
	require.Equal(t, 3, rep.Summary()[synchronizer.ActionDelete], "plans: %v", rep.Plans)
	for _, n := range []string{"gone-a", "gone-b", "gone-c"} {
		f.eventually(func() bool { return f.cronJob(n) == nil }, n+" deleted")
	}
}

func TestTwoInstallationsInOneNamespaceLeaveEachOtherAlone(t *testing.T) {
	t.Parallel()
	a := newFixture(t)
	b := newFixtureIn(t, a.ns)
	b.newInstallation()
	aJobs := a.deployed("alpha-one", "alpha-two")
	bJobs := b.deployed("beta-one", "beta-two")
	a.unchanged(aJobs)

	// Each deletes a job of its own, and runs with the other's CronJobs in sight.
	require.NoError(t, a.svc.DeleteJob(t.Context(), team, "alpha-two"))
	require.NoError(t, b.svc.DeleteJob(t.Context(), team, "beta-two"))
	a.start()
	b.start()
	a.eventually(func() bool { return a.cronJob("alpha-two") == nil }, "a's deleted job's CronJob gone")
	b.eventually(func() bool { return b.cronJob("beta-two") == nil }, "b's deleted job's CronJob gone")

	// A name one holds is a conflict for the other, never a takeover.
	b.createJob("alpha-one")
	b.deploy("alpha-one", job.DeploymentChange{JobVersion: ptr("v9")})
	b.eventually(func() bool { return b.state("alpha-one").Desired.Status == job.StatusPlatformError }, "conflict reported")
	require.Contains(t, b.state("alpha-one").Desired.Message, "another datajobs installation")
	a.stop()
	b.stop()
	delete(aJobs, "alpha-two")
	delete(bJobs, "beta-two")
	a.unchanged(aJobs)
	b.unchanged(bJobs)
	for _, f := range []*fixture{a, b} {
		rep, err := f.synchronizer(false).RunOnce(t.Context(), f.epoch)
		require.NoError(t, err)
		require.Nil(t, rep.PruneRefusal)
		require.Zero(t, rep.Summary()[synchronizer.ActionOrphan], "plans: %v", rep.Plans)
	}
	a.unchanged(aJobs)
	b.unchanged(bJobs)
}

func TestCronJobsFromBeforeInstallationLabelsAreLabelledNotRecreated(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	j := f.createJob("pre-upgrade")
	f.deploy("pre-upgrade", job.DeploymentChange{JobVersion: ptr("v1")})
	st := f.state("pre-upgrade")
	// What the previous version created: the same CronJob without the installation label.
	old, _ := kube.Render(*st.Job, *st.Desired, f.render)
	old, err := f.client.BatchV1().CronJobs(f.ns).Create(t.Context(), old, metav1.CreateOptions{FieldManager: kube.FieldManager})
	require.NoError(t, err)
	require.NotContains(t, old.Labels, kube.LabelInstallation)

	rep, err := f.synchronizer(false).RunOnce(t.Context(), f.epoch)
	require.NoError(t, err)
	require.Empty(t, rep.Errors)
	require.Equal(t, 1, rep.Summary()[synchronizer.ActionAdopt], "plans: %v", rep.Plans)
	cj := f.cronJob("pre-upgrade")
	require.Equal(t, old.UID, cj.UID, "labelled in place, not re-created")
	id, err := f.db.InstallationID(t.Context())
	require.NoError(t, err)
	require.Equal(t, id, cj.Labels[kube.LabelInstallation])
	require.Equal(t, j.UID, f.synced("pre-upgrade").Actual.JobUID)
}

func TestCreateRacingAnUnmanagedCronJobDoesNotTakeItOver(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createJob("raced-name")
	f.deploy("raced-name", job.DeploymentChange{JobVersion: ptr("v1")})
	// Someone creates a CronJob of that name right after the plan saw none, before the
	// create reaches the apiserver (the informer cannot have seen it).
	raced := make(chan error, 1)
	var foreign *batchv1.CronJob
	f.applier.beforeCreate = func(cj *batchv1.CronJob) {
		other := cj.DeepCopy()
		other.Labels = map[string]string{"app": "someone-else"}
		other.Annotations = nil
		other.Spec.Schedule = "7 7 * * *"
		var err error
		foreign, err = f.client.BatchV1().CronJobs(f.ns).Create(t.Context(), other, metav1.CreateOptions{FieldManager: "someone-else"})
		raced <- err
	}
	f.start()
	require.NoError(t, <-raced)
	f.eventually(func() bool { return f.state("raced-name").Desired.Status == job.StatusPlatformError }, "conflict reported")
	require.Contains(t, f.state("raced-name").Desired.Message, "not managed by datajobs")
	f.stop()
	after := f.cronJob("raced-name")
	require.Equal(t, foreign.UID, after.UID)
	require.Equal(t, foreign.ResourceVersion, after.ResourceVersion, "the unmanaged CronJob is untouched")
	require.Equal(t, "7 7 * * *", after.Spec.Schedule)
}

func TestReplaceForceWithAnotherImageIsRepaired(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cj := f.deployed("replaced")["replaced"]
	require.Equal(t, int64(1), cj.Generation)

	// kubectl replace --force: delete, then create the edited manifest; the new object
	// starts again at generation 1, the generation the database recorded.
	require.NoError(t, f.client.BatchV1().CronJobs(f.ns).Delete(t.Context(), "replaced", metav1.DeleteOptions{}))
	f.eventually(func() bool { return f.cronJob("replaced") == nil }, "deleted")
	edited := cj.DeepCopy()
	edited.ObjectMeta = metav1.ObjectMeta{Name: cj.Name, Namespace: cj.Namespace, Labels: cj.Labels, Annotations: cj.Annotations}
	edited.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image = "evil/image:latest"
	edited, err := f.client.BatchV1().CronJobs(f.ns).Create(t.Context(), edited, metav1.CreateOptions{FieldManager: "kubectl-replace"})
	require.NoError(t, err)
	require.Equal(t, int64(1), edited.Generation)

	rep, err := f.synchronizer(false).RunOnce(t.Context(), f.epoch)
	require.NoError(t, err)
	require.Equal(t, 1, rep.Summary()[synchronizer.ActionRepair], "plans: %v", rep.Plans)
	require.Equal(t, "registry.test/jobs/replaced:v1", f.cronJob("replaced").Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image)
}

func TestAPanickingReconcileDoesNotKillTheProcess(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createJob("panicky")
	f.deploy("panicky", job.DeploymentChange{JobVersion: ptr("v1")})
	f.applier.setPanicking(true)
	reg := prometheus.NewRegistry()
	f.startWith(synchronizer.Config{Metrics: synchronizer.NewMetrics(reg)})
	f.eventually(func() bool { return f.applier.panicCount() > 1 }, "panicked, and retried")
	f.applier.setPanicking(false)
	f.synced("panicky")
	require.NotNil(t, f.cronJob("panicky"))
	require.GreaterOrEqual(t, gathered(t, reg, "datajobs_sync_panics_total"), 2.0)
	require.GreaterOrEqual(t, gathered(t, reg, "datajobs_sync_queue_retries_total"), 2.0, "client-go's workqueue metrics")
}

// gathered is the sum of a metric's values over its labels as /metrics would show them
// (0 while it has none: a vector not yet observed).
func gathered(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	families, err := g.Gather()
	require.NoError(t, err)
	sum := 0.0
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

func TestAChangedRenderingConfigurationRefusesToSyncUntilAccepted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	before := f.deployed("configured")

	// A replica (or a sync --once) started with another --image-registry.
	f.render.ImageRegistry = "other.registry/jobs"
	s := f.synchronizer(false)
	_, err := s.RunOnce(t.Context(), f.epoch)
	require.ErrorIs(t, err, synchronizer.ErrConfigChanged)
	require.Contains(t, err.Error(), "--accept-config-change")
	require.Contains(t, s.Safety().ConfigRefused, "--accept-config-change", "shown in the health detail")
	f.unchanged(before)

	rep, err := f.synchronizerWith(synchronizer.Config{AcceptConfigChange: true}).RunOnce(t.Context(), f.epoch)
	require.NoError(t, err)
	require.Empty(t, rep.Errors)
	require.Equal(t, "other.registry/jobs/configured:v1", f.cronJob("configured").Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image)

	// The accepted configuration is now the recorded one: the old one is refused.
	f.render.ImageRegistry = "registry.test/jobs"
	_, err = f.synchronizer(false).RunOnce(t.Context(), f.epoch)
	require.ErrorIs(t, err, synchronizer.ErrConfigChanged)
	require.Equal(t, "other.registry/jobs/configured:v1", f.cronJob("configured").Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image)
}

func TestALeaderThatCannotReachTheAPIServerStepsDown(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// A real client-go client of an apiserver that does not answer.
	rc := testenv.RestConfig(t)
	rc.Host = "https://127.0.0.1:1"
	rc.Timeout = time.Second
	cs, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)
	s := synchronizer.New(synchronizer.Config{Render: f.render, StepDownAfter: 2 * time.Second}, f.db, cs, nil)
	err = s.Run(t.Context(), f.epoch)
	require.ErrorIs(t, err, synchronizer.ErrAPIServerUnreachable)
}
