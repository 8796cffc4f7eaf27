package kube

import (
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/datajobs/datajobs/internal/testenv"
)

// cached is what the leader's informer cache keeps of the CronJob name now (Trim).
func (c cluster) cached(t *testing.T, name string) *batchv1.CronJob {
	t.Helper()
	out, err := Trim(c.get(t, name))
	require.NoError(t, err)
	return out.(*batchv1.CronJob)
}

// The synchronizer plans from trimmed CronJobs: a cache that dropped managedFields must not
// hide a field someone else added (Drifted's last rule), nor invent drift.
func TestTrimmedCronJobShowsTheSameDrift(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	tests := []struct {
		name string
		edit func(*batchv1.CronJob)
	}{
		{"no edit", nil},
		{"a changed schedule", func(cj *batchv1.CronJob) { cj.Spec.Schedule = "* * * * *" }},
		{"an added resource limit, owned by another manager", func(cj *batchv1.CronJob) {
			container(cj).Resources.Limits[neverRendered] = resource.MustParse("1")
		}},
		{"a label added by hand", func(cj *batchv1.CronJob) { cj.Labels["example.com/hand"] = "kept" }},
	}
	for i, tt := range tests {
		for _, created := range []bool{true, false} {
			j := testJob()
			j.Name = j.Name + string(rune('a'+i))
			if !created {
				j.Name += "-applied"
			}
			rendered, _ := Render(j, testDeployment(), c.cfg)
			_, err := c.applier.Apply(t.Context(), nil, rendered)
			require.NoError(t, err)
			if !created { // applied over: datajobs' fields are its apply manager's
				_, err = c.apply(t.Context(), rendered)
				require.NoError(t, err)
			}
			if tt.edit != nil {
				c.edit(t, j.Name, tt.edit)
			}
			full := c.get(t, j.Name)
			wantDrift, wantReason := Drifted(full, rendered)
			cached := c.cached(t, j.Name)
			drift, reason := Drifted(cached, rendered)
			require.Equal(t, wantDrift, drift, "%s (created only: %v)", tt.name, created)
			require.Equal(t, wantReason, reason, "%s (created only: %v)", tt.name, created)
			require.Empty(t, cached.Status.LastScheduleTime)
			require.LessOrEqual(t, len(cached.ManagedFields), len(full.ManagedFields))
		}
	}
}

// A CronJob datajobs created and never applied over holds its fields as an Update entry,
// which the Applier hands over to its apply manager before the first apply; from the
// trimmed cache it must read them from the apiserver, or an apply would leave behind the
// fields datajobs stops rendering (the unscheduled annotation here).
func TestApplyFromTheTrimmedCacheRemovesFields(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	d := testDeployment()
	d.Schedule = ""
	unscheduled, _ := Render(testJob(), d, c.cfg)
	_, err := c.applier.Apply(t.Context(), nil, unscheduled)
	require.NoError(t, err)
	cached := c.cached(t, unscheduled.Name)
	require.True(t, managedFieldsTrimmed(cached.ManagedFields), "a created CronJob is cached with the hand-over marker")

	d.Schedule = "5 4 * * *"
	scheduled, _ := Render(testJob(), d, c.cfg)
	_, err = c.applier.Apply(t.Context(), cached, scheduled)
	require.NoError(t, err)
	live := c.get(t, scheduled.Name)
	require.NotContains(t, live.Annotations, AnnotationUnscheduled)
	drift, reason := Drifted(live, scheduled)
	require.False(t, drift, reason)
	require.Nil(t, c.cached(t, scheduled.Name).ManagedFields, "once handed over, nothing of managedFields is cached")
	for _, mf := range live.ManagedFields {
		require.NotNil(t, mf.FieldsV1, "the apiserver keeps every manager's fields: %s", mf.Manager)
	}
}

// The first change of a CronJob datajobs created, planned from the trimmed cache, costs a
// patch renaming datajobs' Update entry and the apply, not a GET of the object first
// (issue 28: a GET per first change was a third of the apiserver's requests at 50
// changes a second), and leaves datajobs' fields with its apply manager alone, a
// CronJob controller's status entry (of a CronJob that ran) kept beside it.
func TestTheFirstChangeFromTheTrimmedCacheReadsNothing(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	var gets, writes atomic.Int64
	rc := testenv.RestConfig(t)
	rc.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodGet {
				gets.Add(1)
			} else {
				writes.Add(1)
			}
			return rt.RoundTrip(r)
		})
	}
	counted := NewApplier(kubernetes.NewForConfigOrDie(rc), c.ns)
	d := testDeployment()
	created, _ := Render(testJob(), d, c.cfg)
	_, err := c.applier.Apply(t.Context(), nil, created)
	require.NoError(t, err)
	// What the CronJob controller adds when the CronJob runs: a status entry of its own.
	live := c.get(t, created.Name)
	now := metav1.Now()
	live.Status.LastScheduleTime = &now
	_, err = c.client.BatchV1().CronJobs(c.ns).UpdateStatus(t.Context(), live, metav1.UpdateOptions{FieldManager: "kube-controller-manager"})
	require.NoError(t, err)
	cached := c.cached(t, created.Name)
	require.True(t, managedFieldsTrimmed(cached.ManagedFields))

	d.Enabled = false
	changed, _ := Render(testJob(), d, c.cfg)
	_, err = counted.Apply(t.Context(), cached, changed)
	require.NoError(t, err)
	require.Zero(t, gets.Load(), "no read of the object")
	require.Equal(t, int64(2), writes.Load(), "the hand-over patch and the apply")
	after := c.get(t, created.Name)
	require.True(t, *after.Spec.Suspend)
	managers := map[string]metav1.ManagedFieldsOperationType{}
	for _, mf := range after.ManagedFields {
		managers[mf.Manager+"/"+mf.Subresource] = mf.Operation
	}
	require.Equal(t, map[string]metav1.ManagedFieldsOperationType{
		FieldManager + "/":               metav1.ManagedFieldsOperationApply,
		"kube-controller-manager/status": metav1.ManagedFieldsOperationUpdate,
	}, managers)
	require.Nil(t, c.cached(t, created.Name).ManagedFields, "nothing left to hand over")
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A trimmed cached CronJob that is stale (someone wrote the object since) is refused like
// any stale view: the read of the managedFields does not make the write unconditional.
func TestApplyFromAStaleTrimmedViewIsRefused(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	d := testDeployment()
	rendered, _ := Render(testJob(), d, c.cfg)
	_, err := c.applier.Apply(t.Context(), nil, rendered)
	require.NoError(t, err)
	seen := c.cached(t, rendered.Name)
	c.edit(t, rendered.Name, func(cj *batchv1.CronJob) { cj.Labels["example.com/hand"] = "edited" })

	d.Schedule = "9 9 * * *"
	changed, _ := Render(testJob(), d, c.cfg)
	_, err = c.applier.Apply(t.Context(), seen, changed)
	require.True(t, apierrors.IsConflict(err), err)
	require.Equal(t, rendered.Spec.Schedule, c.get(t, rendered.Name).Spec.Schedule, "nothing written")
}

// Trim is idempotent (client-go may hand it an object it already transformed) and keeps
// of a pod what ObserveExecution and the log reader read.
func TestTrimIsIdempotentAndKeepsWhatIsRead(t *testing.T) {
	p := &corev1.Pod{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "main", Image: "reg/x:1", Env: []corev1.EnvVar{{Name: "A", Value: "1"}}}},
		Volumes:    []corev1.Volume{{Name: "v"}},
	}}
	p.Name, p.Namespace, p.Labels = "x-1-abc", "ns", map[string]string{LabelJobName: "x-1"}
	p.Status.Phase = corev1.PodRunning
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", ImageID: "sha", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	once, err := Trim(p)
	require.NoError(t, err)
	twice, err := Trim(once)
	require.NoError(t, err)
	require.Equal(t, once, twice)
	got := twice.(*corev1.Pod)
	require.Equal(t, "x-1", got.Labels[LabelJobName])
	require.Equal(t, "main", mainContainer(got).Name)
	require.Equal(t, "reg/x:1", mainContainer(got).Image)
	require.True(t, ran(got))
	require.Empty(t, got.Spec.Volumes)
	require.Empty(t, mainContainer(got).Env)
}

// A cached CronJob carries its spec encoded: LiveSpec gives back exactly what the
// apiserver returned, and Trim of a trimmed object changes nothing more.
func TestTrimmedCronJobKeepsItsSpecEncoded(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	rendered, _ := Render(testJob(), testDeployment(), c.cfg)
	_, err := c.applier.Apply(t.Context(), nil, rendered)
	require.NoError(t, err)
	full := c.get(t, rendered.Name)
	cached := c.cached(t, rendered.Name)
	require.Empty(t, cached.Spec.Schedule, "the decoded spec is not kept")
	require.Equal(t, full.Spec, LiveSpec(cached))
	require.Equal(t, full.Spec, LiveSpec(full))
	again, err := Trim(cached.DeepCopy())
	require.NoError(t, err)
	require.Equal(t, cached, again)
}
