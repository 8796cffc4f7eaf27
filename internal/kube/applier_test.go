package kube

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.WithControllers())
}

// cluster is one test's namespace with an Applier and a client acting as "someone else".
type cluster struct {
	ns      string
	client  kubernetes.Interface
	applier *Applier
	cfg     RenderConfig
}

func newCluster(t *testing.T) cluster {
	t.Helper()
	ns := testenv.Namespace(t)
	cs := testenv.Clientset(t)
	cfg := testConfig()
	cfg.Namespace = ns
	return cluster{ns: ns, client: cs, applier: NewWriter(cs, ns).CronJobs(), cfg: cfg}
}

func (c cluster) get(t *testing.T, name string) *batchv1.CronJob {
	t.Helper()
	cj, err := c.client.BatchV1().CronJobs(c.ns).Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return cj
}

// apply applies cj over whatever the cluster holds now, as the synchronizer does from an
// up-to-date cache.
func (c cluster) apply(ctx context.Context, cj *batchv1.CronJob) (*batchv1.CronJob, error) {
	return applyOver(ctx, c.client, c.applier, cj)
}

func applyOver(ctx context.Context, client kubernetes.Interface, a *Applier, cj *batchv1.CronJob) (*batchv1.CronJob, error) {
	live, err := client.BatchV1().CronJobs(cj.Namespace).Get(ctx, cj.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		live = nil
	case err != nil:
		return nil, err
	}
	return a.Apply(ctx, live, cj)
}

// edit changes the live CronJob the way `kubectl edit` does: a full update by another
// field manager, tried again on a conflict as a person would (the CronJob controller may
// write the object between the read and the update: a Conflict seen under load).
func (c cluster) edit(t *testing.T, name string, change func(*batchv1.CronJob)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cj := c.get(t, name)
		change(cj)
		_, err := c.client.BatchV1().CronJobs(c.ns).Update(t.Context(), cj, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
		return err
	})
	require.NoError(t, err)
}

func TestApplyRoundTrips(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	tests := []struct {
		name   string
		change func(*job.Job, *job.Deployment)
	}{
		{"a full deployment", func(j *job.Job, d *job.Deployment) {}},
		{"default resources", func(j *job.Job, d *job.Deployment) { d.Resources = job.Resources{} }},
		{"odd quantities", func(j *job.Job, d *job.Deployment) {
			d.Resources = job.Resources{CPURequestMillis: 1, CPULimitMillis: 100000, MemoryRequestBytes: 1536, MemoryLimitBytes: 123456789}
		}},
		{"an unscheduled deployment", func(j *job.Job, d *job.Deployment) { d.Schedule = "" }},
		{"a disabled deployment", func(j *job.Job, d *job.Deployment) { d.Enabled = false }},
		{"no contacts and no db type", func(j *job.Job, d *job.Deployment) {
			j.Contacts, j.DBDefaultType, d.VDKVersion = job.Contacts{}, "", ""
		}},
		{"a macro schedule", func(j *job.Job, d *job.Deployment) { d.Schedule = "@hourly" }},
		// optional: false must come back as sent, or every pass would re-apply the team's jobs.
		{"a team with OAuth credentials", func(j *job.Job, d *job.Deployment) { j.TeamOAuth = true }},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			j, d := testJob(), testDeployment()
			j.Name = j.Name + string(rune('a'+i))
			tt.change(&j, &d)
			rendered, hash := Render(j, d, c.cfg)

			applied, err := c.apply(t.Context(), rendered)
			require.NoError(t, err)
			require.NotEmpty(t, applied.UID)

			live := c.get(t, j.Name)
			require.Equal(t, hash, live.Annotations[AnnotationHash])
			again, _ := Render(j, d, c.cfg)
			drift, reason := Drifted(live, again)
			require.False(t, drift, reason)
			require.Empty(t, live.ManagedFields[1:], "only datajobs manages a freshly applied cronjob")
			require.Equal(t, FieldManager, live.ManagedFields[0].Manager)
		})
	}
}

func TestApplyUnchangedWritesNothing(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	rendered, _ := Render(testJob(), testDeployment(), c.cfg)
	created, err := c.apply(t.Context(), rendered)
	require.NoError(t, err)
	// The first apply after the create hands the created fields to the apply manager
	// (managedFields only); from then on an unchanged apply writes nothing.
	first, err := c.apply(t.Context(), rendered)
	require.NoError(t, err)
	require.Equal(t, created.Generation, first.Generation, "the spec is untouched")
	require.Len(t, first.ManagedFields, 1)
	require.Equal(t, metav1.ManagedFieldsOperationApply, first.ManagedFields[0].Operation)

	for range 3 {
		again, _ := Render(testJob(), testDeployment(), c.cfg)
		got, err := c.apply(t.Context(), again)
		require.NoError(t, err)
		require.Equal(t, first.ResourceVersion, got.ResourceVersion)
		require.Equal(t, first.ManagedFields, got.ManagedFields)
	}
	// Another deployer alone is a write if applied, but the hash says there is nothing to do.
	d := testDeployment()
	d.DeployedBy = "bob"
	byBob, hash := Render(testJob(), d, c.cfg)
	require.Equal(t, first.Annotations[AnnotationHash], hash)
	drift, reason := Drifted(c.get(t, byBob.Name), byBob)
	require.False(t, drift, reason)
}

func TestApplyChangesAndRemovesFields(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	d := testDeployment()
	d.Schedule = ""
	unscheduled, _ := Render(testJob(), d, c.cfg)
	_, err := c.apply(t.Context(), unscheduled)
	require.NoError(t, err)
	require.Equal(t, "true", c.get(t, unscheduled.Name).Annotations[AnnotationUnscheduled])

	d.Schedule, d.Enabled, d.JobVersion = "5 4 * * *", false, "9d8c7b6"
	scheduled, hash := Render(testJob(), d, c.cfg)
	_, err = c.apply(t.Context(), scheduled)
	require.NoError(t, err)

	live := c.get(t, scheduled.Name)
	require.NotContains(t, live.Annotations, AnnotationUnscheduled)
	require.Equal(t, hash, live.Annotations[AnnotationHash])
	require.Equal(t, "5 4 * * *", live.Spec.Schedule)
	require.True(t, *live.Spec.Suspend)
	require.Equal(t, "registry.example.com/datajobs/sales-ingest:9d8c7b6", container(live).Image)
	drift, reason := Drifted(live, scheduled)
	require.False(t, drift, reason)
}

func TestApplyRepairsHandEdits(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	tests := []struct {
		name   string
		edit   func(*batchv1.CronJob)
		reason string
	}{
		{"a changed schedule", func(cj *batchv1.CronJob) { cj.Spec.Schedule = "* * * * *" }, "spec.schedule differs"},
		{"a changed image", func(cj *batchv1.CronJob) { container(cj).Image = "evil:latest" }, "image differs"},
		{"a changed env var", func(cj *batchv1.CronJob) { container(cj).Env[0].Value = "other" }, "env[DATAJOBS_DEPLOYMENT_ID].value differs"},
		{"a resumed cronjob", func(cj *batchv1.CronJob) { cj.Spec.Suspend = new(true) }, "spec.suspend differs"},
		{"a removed time zone", func(cj *batchv1.CronJob) { cj.Spec.TimeZone = nil }, "spec.timeZone differs"},
		{"a changed memory limit", func(cj *batchv1.CronJob) {
			container(cj).Resources.Limits[corev1.ResourceMemory] = resource.MustParse("4Gi")
		}, "limits.memory differs"},
		{"an added env var", func(cj *batchv1.CronJob) {
			container(cj).Env = append(container(cj).Env, corev1.EnvVar{Name: "EXTRA", Value: "1"})
		}, "env differs"},
		{"an added resource limit", func(cj *batchv1.CronJob) {
			container(cj).Resources.Limits[neverRendered] = resource.MustParse("1")
		}, `f:example.com/widgets is set by field manager "kubectl-edit"`},
		{"an added node selector", func(cj *batchv1.CronJob) {
			cj.Spec.JobTemplate.Spec.Template.Spec.NodeSelector = map[string]string{"disk": "ssd"}
		}, `f:nodeSelector`},
		{"a removed managed-by label", func(cj *batchv1.CronJob) { delete(cj.Labels, LabelManagedBy) }, "metadata.labels.app.kubernetes.io/managed-by differs"},
		{"a changed hash annotation", func(cj *batchv1.CronJob) { cj.Annotations[AnnotationHash] = "x" }, "annotation datajobs.io/deployment-hash"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			j := testJob()
			j.Name = j.Name + string(rune('a'+i))
			rendered, _ := Render(j, testDeployment(), c.cfg)
			_, err := c.apply(t.Context(), rendered)
			require.NoError(t, err)

			c.edit(t, j.Name, func(cj *batchv1.CronJob) {
				cj.Labels["example.com/hand"] = "kept"
				tt.edit(cj)
			})
			drift, reason := Drifted(c.get(t, j.Name), rendered)
			require.True(t, drift)
			require.Contains(t, reason, tt.reason)

			repaired, err := c.apply(t.Context(), rendered)
			require.NoError(t, err)
			live := c.get(t, j.Name)
			require.Equal(t, repaired.ResourceVersion, live.ResourceVersion)
			drift, reason = Drifted(live, rendered)
			require.False(t, drift, reason)
			require.Equal(t, "kept", live.Labels["example.com/hand"], "labels datajobs does not render are left alone")
			require.Equal(t, rendered.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Env, container(live).Env)
			require.Nil(t, live.Spec.JobTemplate.Spec.Template.Spec.NodeSelector)
			require.NotContains(t, container(live).Resources.Limits, neverRendered)

			// The repaired object is managed as if freshly applied: unchanged applies write
			// nothing, and later changes still remove what datajobs stops rendering.
			again, err := c.apply(t.Context(), rendered)
			require.NoError(t, err)
			require.Equal(t, live.ResourceVersion, again.ResourceVersion)
			d := testDeployment()
			d.Schedule = ""
			unscheduled, _ := Render(j, d, c.cfg)
			_, err = c.apply(t.Context(), unscheduled)
			require.NoError(t, err)
			d.Schedule = "1 2 * * *"
			scheduled, _ := Render(j, d, c.cfg)
			_, err = c.apply(t.Context(), scheduled)
			require.NoError(t, err)
			live = c.get(t, j.Name)
			require.NotContains(t, live.Annotations, AnnotationUnscheduled)
			drift, reason = Drifted(live, scheduled)
			require.False(t, drift, reason)
		})
	}
}

func TestApplyRecreatesDeletedCronJob(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	rendered, _ := Render(testJob(), testDeployment(), c.cfg)
	first, err := c.apply(t.Context(), rendered)
	require.NoError(t, err)
	require.NoError(t, c.client.BatchV1().CronJobs(c.ns).Delete(t.Context(), rendered.Name, metav1.DeleteOptions{}))

	second, err := c.apply(t.Context(), rendered)
	require.NoError(t, err)
	require.NotEqual(t, first.UID, second.UID)
	drift, reason := Drifted(c.get(t, rendered.Name), rendered)
	require.False(t, drift, reason)
}

func TestReplaceOlderIncarnation(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	oldJob := testJob()
	old, _ := Render(oldJob, testDeployment(), c.cfg)
	oldLive, err := c.apply(t.Context(), old)
	require.NoError(t, err)

	newJob := testJob()
	newJob.UID = "9c1d7f7a-6f0e-4c4b-8f00-2a1b3c4d5e6f"
	rendered, _ := Render(newJob, testDeployment(), c.cfg)
	drift, reason := Drifted(oldLive, rendered)
	require.True(t, drift)
	require.Contains(t, reason, LabelJobUID)

	newLive, err := c.applier.Replace(t.Context(), oldLive, rendered)
	require.NoError(t, err)
	require.NotEqual(t, oldLive.UID, newLive.UID)
	live := c.get(t, rendered.Name)
	require.Equal(t, newLive.UID, live.UID)
	require.Equal(t, newJob.UID, live.Labels[LabelJobUID])
	drift, reason = Drifted(live, rendered)
	require.False(t, drift, reason)

	// A stale pass that still holds the old object cannot delete the new one.
	_, err = c.applier.Replace(t.Context(), oldLive, old)
	require.Error(t, err)
	require.True(t, apierrors.IsConflict(err), err)
	require.Equal(t, newLive.UID, c.get(t, rendered.Name).UID)
}

func TestDelete(t *testing.T) {
	t.Parallel()
	c := newCluster(t)

	never := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "never-existed", Namespace: c.ns}}
	require.NoError(t, c.applier.Delete(t.Context(), never))
	never.UID = "0a6f1d3e-1111-2222-3333-444455556666"
	require.NoError(t, c.applier.Delete(t.Context(), never))

	rendered, _ := Render(testJob(), testDeployment(), c.cfg)
	live, err := c.apply(t.Context(), rendered)
	require.NoError(t, err)

	other := live.DeepCopy()
	other.UID = "0a6f1d3e-1111-2222-3333-444455556666"
	err = c.applier.Delete(t.Context(), other)
	require.True(t, apierrors.IsConflict(err), err)
	require.Equal(t, live.UID, c.get(t, live.Name).UID, "a delete for another UID leaves the object")

	// Someone changed the object since it was seen: a delete decided from the stale view
	// is refused.
	c.edit(t, live.Name, func(cj *batchv1.CronJob) { cj.Labels["example.com/hand"] = "edited" })
	err = c.applier.Delete(t.Context(), live)
	require.True(t, apierrors.IsConflict(err), err)
	live = c.get(t, live.Name)
	gone, err := c.applier.Gone(t.Context(), live.Name, live.Labels[LabelJobUID])
	require.NoError(t, err)
	require.False(t, gone)

	// A running execution: a Job the CronJob controller created, owned by the CronJob.
	running := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: live.Name + "-run", Namespace: c.ns, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "batch/v1", Kind: "CronJob", Name: live.Name, UID: live.UID, Controller: new(true),
		}}},
		Spec: live.Spec.JobTemplate.Spec,
	}
	running, err = c.client.BatchV1().Jobs(c.ns).Create(t.Context(), running, metav1.CreateOptions{})
	require.NoError(t, err)

	require.NoError(t, c.applier.Delete(t.Context(), live))
	require.Eventually(t, func() bool {
		gone, err := c.applier.Gone(t.Context(), live.Name, live.Labels[LabelJobUID])
		return err == nil && gone
	}, time.Minute, 50*time.Millisecond, "the garbage collector finishes the delete")
	job, err := c.client.BatchV1().Jobs(c.ns).Get(t.Context(), running.Name, metav1.GetOptions{})
	require.NoError(t, err, "the running execution is left to finish")
	require.Empty(t, job.OwnerReferences)
	require.NoError(t, c.applier.Delete(t.Context(), live), "deleting twice is fine")
}

// Neither create takes over someone else's CronJob that appeared since the caller's view:
// the create by apply (its resourceVersion precondition) nor the plain one.
func TestCreateNeverTakesOverAnExistingCronJob(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	for name, create := range map[string]func(*batchv1.CronJob) (*batchv1.CronJob, error){
		"by apply": func(cj *batchv1.CronJob) (*batchv1.CronJob, error) { return c.applier.Apply(t.Context(), nil, cj) },
		"plainly":  func(cj *batchv1.CronJob) (*batchv1.CronJob, error) { return c.applier.CreatePlainly(t.Context(), cj) },
	} {
		j := testJob()
		j.Name += "-" + strings.ReplaceAll(name, " ", "-")
		rendered, _ := Render(j, testDeployment(), c.cfg)
		// Someone else's CronJob of the same name, not yet in the caller's view.
		foreign := &batchv1.CronJob{
			ObjectMeta: metav1.ObjectMeta{Name: rendered.Name, Namespace: c.ns, Labels: map[string]string{"app": "other"}},
			Spec:       *rendered.Spec.DeepCopy(),
		}
		foreign.Spec.Schedule = "7 7 * * *"
		foreign, err := c.client.BatchV1().CronJobs(c.ns).Create(t.Context(), foreign, metav1.CreateOptions{FieldManager: "someone"})
		require.NoError(t, err)

		_, err = create(rendered)
		require.True(t, apierrors.IsAlreadyExists(err), "%s: %v", name, err)
		require.False(t, IsUserError(err), name)
		after := c.get(t, rendered.Name)
		require.Equal(t, foreign.ResourceVersion, after.ResourceVersion, "%s: the foreign CronJob is untouched", name)
		require.NotContains(t, after.Labels, LabelManagedBy, name)
	}
}

func TestApplyFromAStaleViewIsRefused(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	d := testDeployment()
	rendered, _ := Render(testJob(), d, c.cfg)
	seen, err := c.applier.Apply(t.Context(), nil, rendered)
	require.NoError(t, err)
	c.edit(t, rendered.Name, func(cj *batchv1.CronJob) { cj.Labels["example.com/hand"] = "edited" })

	d.Schedule = "9 9 * * *"
	changed, _ := Render(testJob(), d, c.cfg)
	_, err = c.applier.Apply(t.Context(), seen, changed)
	require.True(t, apierrors.IsConflict(err), err)
	require.Equal(t, rendered.Spec.Schedule, c.get(t, rendered.Name).Spec.Schedule, "nothing written")

	_, err = c.applier.Apply(t.Context(), c.get(t, rendered.Name), changed)
	require.NoError(t, err, "planned again from a fresh view, it applies")
	require.Equal(t, "9 9 * * *", c.get(t, rendered.Name).Spec.Schedule)
}

func TestFencedApplierWritesNothingOnceTheFenceIsDown(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	errDeposed := errors.New("lease lost")
	fenced := NewWriter(c.client, c.ns).Fenced(func(context.Context) error { return errDeposed }).CronJobs()
	rendered, _ := Render(testJob(), testDeployment(), c.cfg)
	_, err := fenced.Apply(t.Context(), nil, rendered)
	require.ErrorIs(t, err, errDeposed)
	_, err = c.client.BatchV1().CronJobs(c.ns).Get(t.Context(), rendered.Name, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "nothing created")

	live, err := c.applier.Apply(t.Context(), nil, rendered)
	require.NoError(t, err)
	d := testDeployment()
	d.Schedule = "9 9 * * *"
	changed, _ := Render(testJob(), d, c.cfg)
	_, err = fenced.Apply(t.Context(), live, changed)
	require.ErrorIs(t, err, errDeposed)
	require.ErrorIs(t, fenced.Delete(t.Context(), live), errDeposed)
	require.Equal(t, live.ResourceVersion, c.get(t, rendered.Name).ResourceVersion, "nothing updated or deleted")
}

func TestApplyErrors(t *testing.T) {
	t.Parallel()
	c := newCluster(t)

	t.Run("an invalid schedule is a user error", func(t *testing.T) {
		t.Parallel()
		d := testDeployment()
		d.Schedule = "every day at noon" // the API validates schedules; this one got past it
		rendered, _ := Render(testJob(), d, c.cfg)
		_, err := c.apply(t.Context(), rendered)
		require.Error(t, err)
		require.True(t, IsUserError(err), err)
		require.Contains(t, err.Error(), "spec.schedule")
	})
	t.Run("an unknown time zone is a user error", func(t *testing.T) {
		t.Parallel()
		cfg := c.cfg
		cfg.TimeZone = "Mars/Olympus_Mons"
		j := testJob()
		j.Name = "other-job"
		rendered, _ := Render(j, testDeployment(), cfg)
		_, err := c.apply(t.Context(), rendered)
		require.True(t, IsUserError(err), err)
	})
	t.Run("a missing namespace is a platform error", func(t *testing.T) {
		t.Parallel()
		cfg := c.cfg
		cfg.Namespace = "no-such-namespace"
		rendered, _ := Render(testJob(), testDeployment(), cfg)
		_, err := applyOver(t.Context(), c.client, NewWriter(c.client, cfg.Namespace).CronJobs(), rendered)
		require.Error(t, err)
		require.False(t, IsUserError(err), err)
	})
	t.Run("a cancelled request is a platform error", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		rendered, _ := Render(testJob(), testDeployment(), c.cfg)
		_, err := c.apply(ctx, rendered)
		require.ErrorIs(t, err, context.Canceled)
		require.False(t, IsUserError(err), err)
	})
	require.False(t, IsUserError(errors.New("boom")))
	require.False(t, IsUserError(nil))
}
