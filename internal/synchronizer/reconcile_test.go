package synchronizer_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/synchronizer"
)

func TestDeployCreatesTheCronJobWithEveryField(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	j := f.createJob("orders-daily")
	f.deploy("orders-daily", job.DeploymentChange{
		JobVersion: ptr("abc123"), Schedule: ptr("15 10 * * *"),
		Resources: job.Resources{CPURequestMillis: 500, CPULimitMillis: 1500, MemoryRequestBytes: 256 << 20, MemoryLimitBytes: 512 << 20},
	})
	f.start()
	st := f.synced("orders-daily")

	cj := f.cronJob("orders-daily")
	require.NotNil(t, cj)
	require.Equal(t, "15 10 * * *", cj.Spec.Schedule)
	require.False(t, *cj.Spec.Suspend)
	require.Equal(t, batchv1.ForbidConcurrent, cj.Spec.ConcurrencyPolicy)
	installation, err := f.db.InstallationID(t.Context())
	require.NoError(t, err)
	require.Equal(t, map[string]string{
		kube.LabelManagedBy: kube.ManagedByValue, kube.LabelJob: "orders-daily", kube.LabelTeam: team, kube.LabelJobUID: j.UID,
		kube.LabelInstallation: installation,
	}, cj.Labels)
	require.Equal(t, "abc123", cj.Annotations[kube.AnnotationJobVersion])
	require.Equal(t, "3.11", cj.Annotations[kube.AnnotationPythonVersion])
	require.Equal(t, "alice", cj.Annotations[kube.AnnotationDeployedBy])
	require.Equal(t, st.Actual.DeploymentVersionSHA, cj.Annotations[kube.AnnotationHash])
	c := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0]
	require.Equal(t, "registry.test/jobs/orders-daily:abc123", c.Image)
	require.True(t, c.Resources.Requests.Cpu().Equal(resource.MustParse("500m")))
	require.True(t, c.Resources.Limits.Cpu().Equal(resource.MustParse("1500m")))
	require.True(t, c.Resources.Requests.Memory().Equal(resource.MustParse("256Mi")))
	require.True(t, c.Resources.Limits.Memory().Equal(resource.MustParse("512Mi")))

	require.Equal(t, j.UID, st.Actual.JobUID)
	require.Equal(t, "abc123", st.Actual.JobVersion)
	require.Equal(t, "15 10 * * *", st.Actual.Schedule)
	require.Equal(t, "alice", st.Actual.DeployedBy)
	require.Equal(t, int64(500), st.Actual.Resources.CPURequestMillis)
	require.Empty(t, st.Desired.Message)
}

func TestUnchangedRedeployWritesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createJob("unchanged")
	change := job.DeploymentChange{JobVersion: ptr("v1")}
	f.deploy("unchanged", change)
	f.start()
	f.synced("unchanged")
	before := f.cronJob("unchanged").ResourceVersion
	rows := f.rowVersions("unchanged")

	// The same deployment again, by another user: nothing to do, nothing written.
	_, err := f.svc.Deploy(t.Context(), team, "unchanged", change, "carol")
	require.NoError(t, err)
	require.Equal(t, rows, f.rowVersions("unchanged"))

	// A full pass by a new synchronizer, which has verified nothing yet, changes nothing.
	f.stop()
	rep, err := f.synchronizer(false).RunOnce(t.Context(), f.epoch)
	require.NoError(t, err)
	require.Empty(t, rep.Errors)
	require.Equal(t, 1, rep.Summary()["unchanged"], "plans: %v", rep.Plans)
	require.Contains(t, rep.Plans[0].Reason, "generation as recorded", "verified without a field-by-field comparison")
	require.Equal(t, before, f.cronJob("unchanged").ResourceVersion)
	require.Equal(t, rows, f.rowVersions("unchanged"))
}

func TestDisableAndEnableFlipOnlySuspend(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createJob("toggled")
	f.deploy("toggled", job.DeploymentChange{JobVersion: ptr("v1")})
	f.start()
	f.synced("toggled")
	enabled := f.cronJob("toggled")

	f.patch("toggled", job.DeploymentChange{Enabled: ptr(false)})
	f.eventually(func() bool { cj := f.cronJob("toggled"); return cj != nil && *cj.Spec.Suspend }, "suspended")
	st := f.synced("toggled")
	require.False(t, st.Actual.Enabled)
	disabled := f.cronJob("toggled")
	require.Equal(t, enabled.Spec.Schedule, disabled.Spec.Schedule)
	require.Equal(t, enabled.Spec.JobTemplate, disabled.Spec.JobTemplate)
	require.Equal(t, enabled.UID, disabled.UID)

	f.patch("toggled", job.DeploymentChange{Enabled: ptr(true)})
	f.eventually(func() bool { return !*f.cronJob("toggled").Spec.Suspend }, "resumed")
	require.True(t, f.synced("toggled").Actual.Enabled)
}

func TestDeletingTheDeploymentDeletesTheCronJobThenTheActualRow(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createJob("removed")
	f.deploy("removed", job.DeploymentChange{JobVersion: ptr("v1")})
	f.start()
	f.synced("removed")

	require.NoError(t, f.svc.DeleteDeployment(t.Context(), team, "removed"))
	f.eventually(func() bool { return f.cronJob("removed") == nil }, "cronjob deleted")
	f.eventually(func() bool { return f.state("removed").Actual == nil }, "actual row deleted")
	require.NotNil(t, f.state("removed").Job, "the job itself stays")
}

func TestJobDeletedWhileTheSynchronizerIsDownLosesItsCronJob(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createJob("gone-job")
	f.deploy("gone-job", job.DeploymentChange{JobVersion: ptr("v1")})
	f.start()
	f.synced("gone-job")
	f.stop()

	require.NoError(t, f.svc.DeleteJob(t.Context(), team, "gone-job"))
	require.NotNil(t, f.cronJob("gone-job"), "nothing deletes it while the synchronizer is down")
	f.start()
	f.eventually(func() bool { return f.cronJob("gone-job") == nil }, "cronjob deleted at start-up")
	f.eventually(func() bool { st := f.state("gone-job"); return st.Actual == nil && st.Job == nil }, "actual row deleted")
}

func TestRecreatedJobEndsWithExactlyItsOwnCronJob(t *testing.T) {
	t.Parallel()
	for _, redeploy := range []bool{false, true} {
		name := map[bool]string{false: "recreated-bare", true: "recreated-deployed"}[redeploy]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.createJob(name)
			f.deploy(name, job.DeploymentChange{JobVersion: ptr("old")})
			f.start()
			f.synced(name)
			old := f.cronJob(name)
			f.stop()

			require.NoError(t, f.svc.DeleteJob(t.Context(), team, name))
			j := f.createJob(name)
			if redeploy {
				f.deploy(name, job.DeploymentChange{JobVersion: ptr("new")})
			}
			f.start()
			if !redeploy {
				f.eventually(func() bool { return f.cronJob(name) == nil }, "old incarnation's cronjob deleted")
				f.eventually(func() bool { return f.state(name).Actual == nil }, "old actual row deleted")
				return
			}
			st := f.synced(name)
			cj := f.cronJob(name)
			require.NotEqual(t, old.UID, cj.UID, "replaced, not patched")
			require.Equal(t, j.UID, cj.Labels[kube.LabelJobUID])
			require.Equal(t, "new", cj.Annotations[kube.AnnotationJobVersion])
			require.Equal(t, j.UID, st.Actual.JobUID)
			list, err := f.client.BatchV1().CronJobs(f.ns).List(t.Context(), metav1.ListOptions{})
			require.NoError(t, err)
			require.Len(t, list.Items, 1)
		})
	}
}

func TestManualDeleteAndEditAreRepaired(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createJob("drifty")
	f.deploy("drifty", job.DeploymentChange{JobVersion: ptr("v1"), Schedule: ptr("0 * * * *")})
	f.start()
	f.synced("drifty")

	// kubectl edit: another field manager changes the schedule and the image.
	cj := f.cronJob("drifty")
	cj.Spec.Schedule = "1 1 1 1 *"
	cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image = "evil/image:latest"
	_, err := f.client.BatchV1().CronJobs(f.ns).Update(t.Context(), cj, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
	require.NoError(t, err)
	f.eventually(func() bool {
		cj := f.cronJob("drifty")
		return cj.Spec.Schedule == "0 * * * *" && cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image == "registry.test/jobs/drifty:v1"
	}, "edit reverted")

	// kubectl label: a metadata edit does not bump the CronJob's generation, and is
	// reverted all the same.
	cj = f.cronJob("drifty")
	cj.Labels[kube.LabelTeam] = "someone-else"
	_, err = f.client.BatchV1().CronJobs(f.ns).Update(t.Context(), cj, metav1.UpdateOptions{FieldManager: "kubectl-label"})
	require.NoError(t, err)
	f.eventually(func() bool { return f.cronJob("drifty").Labels[kube.LabelTeam] == team }, "label edit reverted")

	// kubectl delete.
	uid := f.cronJob("drifty").UID
	require.NoError(t, f.client.BatchV1().CronJobs(f.ns).Delete(t.Context(), "drifty", metav1.DeleteOptions{}))
	f.eventually(func() bool { cj := f.cronJob("drifty"); return cj != nil && cj.UID != uid }, "re-created")
}

func TestUnmanagedCronJobIsNeverTouchedAndOrphansAreRemoved(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	unmanaged := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "someone-elses", Namespace: f.ns, Labels: map[string]string{"app": "other"}},
		Spec: batchv1.CronJobSpec{Schedule: "* * * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "c", Image: "busybox"}},
			}},
		}}},
	}
	unmanaged, err := f.client.BatchV1().CronJobs(f.ns).Create(t.Context(), unmanaged, metav1.CreateOptions{})
	require.NoError(t, err)
	installation, err := f.db.InstallationID(t.Context())
	require.NoError(t, err)
	orphan := unmanaged.DeepCopy()
	orphan.ObjectMeta = metav1.ObjectMeta{
		Name: "orphaned-job", Namespace: f.ns,
		Labels: map[string]string{kube.LabelManagedBy: kube.ManagedByValue, kube.LabelJob: "orphaned-job", kube.LabelInstallation: installation},
	}
	_, err = f.client.BatchV1().CronJobs(f.ns).Create(t.Context(), orphan, metav1.CreateOptions{})
	require.NoError(t, err)

	// A job whose name is taken by the unmanaged CronJob is not deployed over it.
	f.createJob("someone-elses")
	f.deploy("someone-elses", job.DeploymentChange{JobVersion: ptr("v1")})
	// The only CronJob of this installation is the orphan: above any prune fraction but 1.
	f.startWith(synchronizer.Config{PruneMaxFraction: 1})
	f.eventually(func() bool { return f.cronJob("orphaned-job") == nil }, "orphan removed")
	f.eventually(func() bool { d := f.state("someone-elses").Desired; return d.Status == job.StatusPlatformError }, "conflict reported")
	require.Contains(t, f.state("someone-elses").Desired.Message, "not managed by datajobs")
	after := f.cronJob("someone-elses")
	require.Equal(t, unmanaged.ResourceVersion, after.ResourceVersion, "unmanaged CronJob untouched")
}

func TestInvalidSpecIsAUserErrorUntilANewDeployFixesIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createJob("bad-spec")
	// The API refuses bad input; a platform default that Kubernetes rejects (a CPU request
	// above the limit) is one way a valid deployment can still render an invalid CronJob.
	f.deploy("bad-spec", job.DeploymentChange{JobVersion: ptr("v1")})
	f.render.Resources.Default.CPURequestMillis = 4000
	f.start()
	f.eventually(func() bool { return f.state("bad-spec").Desired.Status == job.StatusUserError }, "user_error")
	require.Contains(t, f.state("bad-spec").Desired.Message, "Kubernetes refused")
	require.Nil(t, f.cronJob("bad-spec"))

	f.stop()
	rep, err := f.synchronizer(false).RunOnce(t.Context(), f.epoch)
	require.NoError(t, err)
	require.Equal(t, 1, rep.Summary()["hold"], "not retried without a change: %v", rep.Plans)
	require.Nil(t, f.cronJob("bad-spec"))
	f.start()
	f.deploy("bad-spec", job.DeploymentChange{JobVersion: ptr("v2"), Resources: job.Resources{CPULimitMillis: 8000}})
	f.synced("bad-spec")
	require.NotNil(t, f.cronJob("bad-spec"))
}

func TestUnreachableAPIServerIsAPlatformErrorThatRecovers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.applier.setDown(t)
	f.createJob("flaky-api")
	f.deploy("flaky-api", job.DeploymentChange{JobVersion: ptr("v1")})
	f.start()
	f.eventually(func() bool { return f.state("flaky-api").Desired.Status == job.StatusPlatformError }, "platform_error")
	f.applier.setUp()
	f.synced("flaky-api")
	require.NotNil(t, f.cronJob("flaky-api"))
}

func TestDryRunWritesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createJob("dry-run-job")
	f.deploy("dry-run-job", job.DeploymentChange{JobVersion: ptr("v1")})
	rows := f.rowVersions("dry-run-job")
	rep, err := f.synchronizer(true).RunOnce(t.Context(), f.epoch)
	require.NoError(t, err)
	require.Equal(t, 1, rep.Summary()["create"])
	require.Nil(t, f.cronJob("dry-run-job"))
	require.Equal(t, rows, f.rowVersions("dry-run-job"))
}
