package kube

import (
	"maps"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"unsafe"

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

// The synchronizer plans from trimmed CronJobs, which keep no spec: what tells it that a
// CronJob changed since datajobs wrote it must survive the trim, or a hand edit would go
// unrepaired (a cache that hides it) or every CronJob be read again (one that invents it).
// An edit of the spec moves metadata.generation, which the plan compares with the recorded
// one before it compares any field (it then reads the object: ActionVerify); an edit of a
// label or an annotation stays in the cache as it is; and a field another manager owns
// keeps the managedFields whole for Drifted's last rule.
func TestTrimmedCronJobKeepsWhatTellsAnEdit(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	tests := []struct {
		name             string
		edit             func(*batchv1.CronJob)
		specEdit, drifts bool
	}{
		{"no edit", nil, false, false},
		{"a changed schedule", func(cj *batchv1.CronJob) { cj.Spec.Schedule = "* * * * *" }, true, true},
		{"an added resource limit, owned by another manager", func(cj *batchv1.CronJob) {
			container(cj).Resources.Limits[neverRendered] = resource.MustParse("1")
		}, true, true},
		{"a label added by hand", func(cj *batchv1.CronJob) { cj.Labels["example.com/hand"] = "kept" }, false, false},
		{"a label changed by hand", func(cj *batchv1.CronJob) { cj.Labels[LabelTeam] = "someone-else" }, false, true},
	}
	for i, tt := range tests {
		j := testJob()
		j.Name = j.Name + string(rune('a'+i))
		rendered, _ := Render(j, testDeployment(), c.cfg)
		written, err := c.applier.Apply(t.Context(), nil, rendered)
		require.NoError(t, err)
		if tt.edit != nil {
			c.edit(t, j.Name, tt.edit)
		}
		full := c.get(t, j.Name)
		cached := c.cached(t, j.Name)
		require.True(t, SpecDropped(cached), tt.name)
		_, ok := LiveSpec(cached)
		require.False(t, ok, "%s: no spec to compare from the cache", tt.name)
		require.Equal(t, tt.specEdit, cached.Generation != written.Generation, "%s: the generation tells a spec edit", tt.name)
		require.Equal(t, full.Generation, cached.Generation, tt.name)
		require.Equal(t, full.UID, cached.UID, tt.name)
		require.Equal(t, full.ResourceVersion, cached.ResourceVersion, tt.name)
		require.Equal(t, full.Labels, cached.Labels, "%s: labels as they are", tt.name)
		for k, v := range full.Annotations {
			require.Equal(t, v, cached.Annotations[k], "%s: annotation %s as it is", tt.name, k)
		}
		drifted, _ := Drifted(full, rendered)
		require.Equal(t, tt.drifts, drifted, tt.name)
		if _, _, foreign := foreignSpecField(full); foreign {
			require.Equal(t, full.ManagedFields, cached.ManagedFields, "%s: another manager's fields are kept", tt.name)
		}
		require.Empty(t, cached.Status.LastScheduleTime)
	}
}

// createdPlainly creates cj with a plain create (as the synchronizer does behind a
// backlog, and as older datajobs always did), whose fields managedFields record as
// datajobs' Update entry.
func (c cluster) createdPlainly(t *testing.T, cj *batchv1.CronJob) *batchv1.CronJob {
	t.Helper()
	created, err := c.applier.CreatePlainly(t.Context(), cj)
	require.NoError(t, err)
	return created
}

// A CronJob datajobs created with a plain create (behind a backlog, or an older datajobs)
// and never applied over holds its fields as an Update entry, which the Applier hands over to its
// apply manager before the first apply; from the trimmed cache it must read them from the
// apiserver, or an apply would leave behind the fields datajobs stops rendering (the
// unscheduled annotation here).
func TestApplyFromTheTrimmedCacheRemovesFields(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	d := testDeployment()
	d.Schedule = ""
	unscheduled, _ := Render(testJob(), d, c.cfg)
	c.createdPlainly(t, unscheduled)
	cached := c.cached(t, unscheduled.Name)
	require.True(t, managedFieldsTrimmed(cached.ManagedFields), "a plainly created CronJob is cached with the hand-over marker")

	d.Schedule = "5 4 * * *"
	scheduled, _ := Render(testJob(), d, c.cfg)
	_, err := c.applier.Apply(t.Context(), cached, scheduled)
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

// countingApplier is an Applier of c's namespace whose requests are counted: reads, and
// writes (any other method).
func (c cluster) countingApplier(t *testing.T) (a *Applier, gets, writes *atomic.Int64) {
	gets, writes = new(atomic.Int64), new(atomic.Int64)
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
	return NewWriter(kubernetes.NewForConfigOrDie(rc), c.ns).CronJobs(), gets, writes
}

// The first change of a CronJob, planned from the trimmed cache, reads nothing (issue 28:
// a GET per first change was a third of the apiserver's requests at 50 changes a second)
// and leaves datajobs' fields with its apply manager, a CronJob controller's status entry
// (of a CronJob that ran) kept beside it. A CronJob the Applier created is owned by that
// manager from its create, so its first change is one apply, as every later one (issue 28:
// the hand-over's write per first change made 200 changes a second apiserver-bound); one
// created plainly (behind a backlog, or by an older datajobs) pays the hand-over once: a patch renaming
// datajobs' Update entry, and the apply.
func TestTheFirstChangeFromTheTrimmedCacheReadsNothing(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	for _, tt := range []struct {
		name   string
		create func(*batchv1.CronJob)
		writes int64
	}{
		{"created by the Applier", func(cj *batchv1.CronJob) {
			_, err := c.applier.Apply(t.Context(), nil, cj)
			require.NoError(t, err)
		}, 1},
		{"created plainly (a backlog, an older datajobs)", func(cj *batchv1.CronJob) { c.createdPlainly(t, cj) }, 2},
	} {
		counted, gets, writes := c.countingApplier(t)
		j := testJob()
		j.Name += "-" + strings.ReplaceAll(tt.name[:10], " ", "-")
		d := testDeployment()
		created, _ := Render(j, d, c.cfg)
		tt.create(created)
		// What the CronJob controller adds when the CronJob runs: a status entry of its own.
		live := c.get(t, created.Name)
		now := metav1.Now()
		live.Status.LastScheduleTime = &now
		_, err := c.client.BatchV1().CronJobs(c.ns).UpdateStatus(t.Context(), live, metav1.UpdateOptions{FieldManager: "kube-controller-manager"})
		require.NoError(t, err)
		cached := c.cached(t, created.Name)

		d.Enabled = false
		changed, _ := Render(j, d, c.cfg)
		_, err = counted.Apply(t.Context(), cached, changed)
		require.NoError(t, err, tt.name)
		require.Zero(t, gets.Load(), "%s: no read of the object", tt.name)
		require.Equal(t, tt.writes, writes.Load(), tt.name)
		after := c.get(t, created.Name)
		require.True(t, *after.Spec.Suspend, tt.name)
		managers := map[string]metav1.ManagedFieldsOperationType{}
		for _, mf := range after.ManagedFields {
			managers[mf.Manager+"/"+mf.Subresource] = mf.Operation
		}
		require.Equal(t, map[string]metav1.ManagedFieldsOperationType{
			FieldManager + "/":               metav1.ManagedFieldsOperationApply,
			"kube-controller-manager/status": metav1.ManagedFieldsOperationUpdate,
		}, managers, tt.name)
		require.Nil(t, c.cached(t, created.Name).ManagedFields, "%s: nothing left to hand over", tt.name)
	}
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
	c.createdPlainly(t, rendered)
	seen := c.cached(t, rendered.Name)
	c.edit(t, rendered.Name, func(cj *batchv1.CronJob) { cj.Labels["example.com/hand"] = "edited" })

	d.Schedule = "9 9 * * *"
	changed, _ := Render(testJob(), d, c.cfg)
	_, err := c.applier.Apply(t.Context(), seen, changed)
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

// A cached CronJob of datajobs keeps no spec but the names of the Secrets its pods read
// (the team OAuth Secret is kept while a CronJob refers to it); any other CronJob keeps its
// spec encoded (the adoption of an import compares it): LiveSpec gives back exactly what
// the apiserver returned. Trim of a trimmed object changes nothing more.
func TestTrimmedCronJobKeepsWhatIsReadOfItsSpec(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	j := testJob()
	j.TeamOAuth = true
	rendered, _ := Render(j, testDeployment(), c.cfg)
	_, err := c.applier.Apply(t.Context(), nil, rendered)
	require.NoError(t, err)
	full := c.get(t, rendered.Name)
	cached := c.cached(t, rendered.Name)
	require.Empty(t, cached.Spec.Schedule, "the decoded spec is not kept")
	require.True(t, RefersToTeamOAuth(full, j.Team))
	require.True(t, RefersToTeamOAuth(cached, j.Team), "the Secret's name is kept")
	require.False(t, RefersToTeamOAuth(cached, "another-team"))
	again, err := Trim(cached.DeepCopy())
	require.NoError(t, err)
	require.Equal(t, cached, again)

	unmanaged := full.DeepCopy()
	unmanaged.ObjectMeta = metav1.ObjectMeta{Name: "imported", Namespace: c.ns, Labels: map[string]string{"app": "vdk"}}
	_, err = c.client.BatchV1().CronJobs(c.ns).Create(t.Context(), unmanaged, metav1.CreateOptions{})
	require.NoError(t, err)
	full = c.get(t, "imported")
	cached = c.cached(t, "imported")
	require.False(t, SpecDropped(cached))
	require.Empty(t, cached.Spec.Schedule, "the decoded spec is not kept")
	spec, ok := LiveSpec(cached)
	require.True(t, ok)
	require.Equal(t, full.Spec, spec)
	spec, ok = LiveSpec(full)
	require.True(t, ok)
	require.Equal(t, full.Spec, spec)
	require.Equal(t, RefersToTeamOAuth(full, j.Team), RefersToTeamOAuth(cached, j.Team))
	again, err = Trim(cached.DeepCopy())
	require.NoError(t, err)
	require.Equal(t, cached, again)
}

// Cached CronJobs share their labels' and annotations' keys and the values many carry
// (issue 28: each decoded object held its own copies, some hundred bytes a CronJob), and
// keep every value as decoded: a changed value would hide a hand edit of a label, or
// invent one.
func TestTrimSharesTheRepeatedMetadataAndKeepsItsValues(t *testing.T) {
	decoded := func(name string) *batchv1.CronJob {
		c := strings.Clone
		return &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{
			Name: c(name), Namespace: c("jobs"),
			Labels:      map[string]string{c(LabelManagedBy): c(ManagedByValue), c(LabelTeam): c("team-a"), c(LabelJob): c(name)},
			Annotations: map[string]string{c(AnnotationHash): c("hash-" + name), c(AnnotationPythonVersion): c("3.11")},
		}}
	}
	a, b := decoded("orders"), decoded("payments")
	wantLabels, wantAnnotations := maps.Clone(a.Labels), maps.Clone(a.Annotations)
	ta, err := Trim(a)
	require.NoError(t, err)
	tb, err := Trim(b)
	require.NoError(t, err)
	ca, cb := ta.(*batchv1.CronJob), tb.(*batchv1.CronJob)
	require.Equal(t, wantLabels, ca.Labels)
	for k, v := range wantAnnotations {
		require.Equal(t, v, ca.Annotations[k])
	}
	same := func(x, y string) bool { return unsafe.StringData(x) == unsafe.StringData(y) }
	require.True(t, same(ca.Namespace, cb.Namespace))
	require.True(t, same(ca.Labels[LabelTeam], cb.Labels[LabelTeam]), "the team's name shared")
	require.True(t, same(ca.Annotations[AnnotationPythonVersion], cb.Annotations[AnnotationPythonVersion]))
	for k := range ca.Labels {
		for l := range cb.Labels {
			if k == l {
				require.True(t, same(k, l), "key %s shared", k)
			}
		}
	}
	require.False(t, same(ca.Labels[LabelJob], cb.Labels[LabelJob]))
}
