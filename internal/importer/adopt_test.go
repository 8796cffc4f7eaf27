package importer_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/importer"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/synchronizer"
)

// snapshot is what must not change about a CronJob across adoption and release.
type snapshot struct {
	uid types.UID
	// generation, not resourceVersion: the CronJob controller writes the status of a
	// fixture whose schedule (*/30) comes due during the test, which said nothing of our
	// writes (a run crossing :00 or :30 failed on it); ours change the spec (generation) or
	// the metadata compared beside it.
	generation  int64
	spec        string
	labels      map[string]string
	annotations map[string]string
}

func (e *env) snapshot() map[string]snapshot {
	e.t.Helper()
	list, err := e.client.BatchV1().CronJobs(e.ns).List(e.t.Context(), metav1.ListOptions{})
	require.NoError(e.t, err)
	out := map[string]snapshot{}
	for i := range list.Items {
		cj := &list.Items[i]
		out[cj.Name] = snapshot{cj.UID, cj.Generation, specJSON(e.t, cj), cj.Labels, cj.Annotations}
	}
	return out
}

func (e *env) synchronizer(dryRun bool) *synchronizer.Synchronizer {
	return synchronizer.New(synchronizer.Config{Render: e.render, DryRun: dryRun, Settings: controller.Settings{Interval: time.Hour}}, e.db, e.client, nil)
}

// pass runs one synchronizer pass; a real one under the synchronizer's lease.
func (e *env) pass(dryRun bool) synchronizer.Report {
	e.t.Helper()
	var epoch int64
	if !dryRun {
		var ok bool
		var err error
		epoch, ok, err = e.db.TryAcquireLease(e.t.Context(), store.SyncLeaseName, "test", time.Hour)
		require.NoError(e.t, err)
		require.True(e.t, ok)
	}
	rep, err := e.synchronizer(dryRun).RunOnce(e.t.Context(), epoch)
	require.NoError(e.t, err)
	require.Empty(e.t, rep.Errors)
	return rep
}

func actions(rep synchronizer.Report) map[string]synchronizer.Action {
	out := map[string]synchronizer.Action{}
	for _, p := range rep.Plans {
		out[p.Name] = p.Action
	}
	return out
}

func ourKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		if k == kube.LabelManagedBy || strings.HasPrefix(k, "datajobs.io/") {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func managedBy(cj *batchv1.CronJob, manager string) bool {
	return slices.ContainsFunc(cj.ManagedFields, func(f metav1.ManagedFieldsEntry) bool { return f.Manager == manager })
}

func TestAdoptionChangesOnlyMetadataAndReleaseRestoresIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fixtureNamespace(e)
	before := e.snapshot()
	e.importCfg(fixtureConfig)

	// Dry run: the plan the operator checks before switching on.
	dry := e.pass(true)
	got := actions(dry)
	for name, a := range got {
		if slices.Contains(importable, name) {
			require.Equal(t, synchronizer.ActionAdopt, a, name)
		} else {
			require.False(t, a.IsChange(), "%s: %s", name, a)
		}
		require.False(t, a.IsChange(), "%s: 0 changes planned", name)
	}
	for _, name := range importable {
		require.Equal(t, synchronizer.ActionAdopt, got[name], name)
	}
	require.Equal(t, before, e.snapshot(), "a dry run writes nothing")

	// Switch on: one real pass adopts the imported CronJobs.
	on := actions(e.pass(false))
	for _, name := range importable {
		require.Equal(t, synchronizer.ActionAdopt, on[name], name)
	}
	adopted := e.snapshot()
	for name, b := range before {
		a := adopted[name]
		require.Equal(t, b.uid, a.uid, "%s was not re-created", name)
		if !slices.Contains(importable, name) {
			require.Equal(t, b, a, "%s was not touched", name)
			continue
		}
		require.Equal(t, b.spec, a.spec, "%s: adopting changes nothing in the spec", name)
		st, err := e.db.LoadSyncState(t.Context(), name)
		require.NoError(t, err)
		installation, err := e.db.InstallationID(t.Context())
		require.NoError(t, err)
		require.Equal(t, map[string]string{
			kube.LabelManagedBy: kube.ManagedByValue, kube.LabelJob: name, kube.LabelTeam: st.Job.Team, kube.LabelJobUID: st.Job.UID,
			kube.LabelInstallation: installation,
		}, filter(a.labels, ourKeys(a.labels)))
		require.Equal(t, st.Actual.DeploymentVersionSHA, a.annotations[kube.AnnotationHash], name)
		require.Equal(t, filter(b.labels, slices.Collect(maps.Keys(b.labels))), filter(a.labels, slices.Collect(maps.Keys(b.labels))), "%s keeps its own labels", name)
		require.True(t, managedBy(e.get(name), kube.FieldManager), name)
	}

	// Steady state: the next pass, by a fresh synchronizer, has nothing to do.
	for name, a := range actions(e.pass(false)) {
		require.Equal(t, synchronizer.ActionUnchanged, a, name)
	}
	require.Equal(t, adopted, e.snapshot(), "no write after adoption")

	// Rollback, with the synchronizer off. A dry run first changes nothing.
	rep, err := importer.Release(t.Context(), e.client, importer.ReleaseConfig{Namespace: e.ns, DryRun: true})
	require.NoError(t, err)
	require.Len(t, rep.CronJobs, len(importable))
	require.Equal(t, adopted, e.snapshot(), "a dry run writes nothing")

	rep, err = importer.Release(t.Context(), e.client, importer.ReleaseConfig{Namespace: e.ns})
	require.NoError(t, err)
	require.Zero(t, rep.Failed())
	for i, r := range rep.CronJobs {
		require.Equal(t, importable[i], r.Name)
		require.Equal(t, importer.ResultReleased, r.Result)
		require.Contains(t, r.Removed, "label "+kube.LabelManagedBy)
		require.Contains(t, r.Removed, "annotation "+kube.AnnotationHash)
	}
	released := e.snapshot()
	for name, b := range before {
		a := released[name]
		require.Equal(t, b.uid, a.uid, name)
		require.Equal(t, b.spec, a.spec, "%s: the spec is byte for byte what it was before the import", name)
		require.Empty(t, ourKeys(a.labels), name)
		require.Empty(t, ourKeys(a.annotations), name)
		require.Equal(t, b.labels, a.labels, name)
		require.False(t, managedBy(e.get(name), kube.FieldManager), "%s: datajobs owns no field", name)
	}
	for _, name := range importable {
		st, err := e.db.LoadSyncState(t.Context(), name)
		require.NoError(t, err)
		require.NotNil(t, st.Desired, "%s: the database keeps its rows", name)
	}
}

func filter(m map[string]string, keys []string) map[string]string {
	out := map[string]string{}
	for _, k := range keys {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return out
}

func TestReleaseGivesUpACronJobDatajobsCreated(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	svc, err := service.New(service.Config{SupportedPythonVersions: []string{"3.11"}}, e.db)
	require.NoError(t, err)
	_, err = svc.CreateJob(t.Context(), "team-a", job.Job{Name: "created-by-datajobs", Team: "team-a", Schedule: "0 3 * * *"})
	require.NoError(t, err)
	v := "v1"
	_, err = svc.Deploy(t.Context(), "team-a", "created-by-datajobs", job.DeploymentChange{JobVersion: &v}, "alice")
	require.NoError(t, err)
	require.Equal(t, synchronizer.ActionCreate, actions(e.pass(false))["created-by-datajobs"])
	managed := e.snapshot()["created-by-datajobs"]

	rep, err := importer.Release(t.Context(), e.client, importer.ReleaseConfig{Namespace: e.ns})

	require.NoError(t, err)
	require.Len(t, rep.CronJobs, 1)
	require.Equal(t, importer.ResultReleased, rep.CronJobs[0].Result, rep.CronJobs[0].Reason)
	cj := e.get("created-by-datajobs")
	require.Equal(t, managed.uid, cj.UID)
	require.Equal(t, managed.spec, specJSON(t, cj), "the spec stays as it is")
	require.Empty(t, ourKeys(cj.Labels))
	require.Empty(t, ourKeys(cj.Annotations))
	require.False(t, managedBy(cj, kube.FieldManager))
	list, err := e.client.BatchV1().CronJobs(e.ns).List(t.Context(), metav1.ListOptions{LabelSelector: kube.ManagedSelector().String()})
	require.NoError(t, err)
	require.Empty(t, list.Items, "nothing is managed any more")
}

func TestARunScheduledDuringTheSwitchOverHappensExactlyOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const name = "vdk-every-minute"
	// Allow: each minute's run is independent of how fast the previous one finished.
	cj := e.create(vdkCronJob(name, "payments", "v1", schedule("* * * * *"), func(cj *batchv1.CronJob) {
		cj.Spec.ConcurrencyPolicy = batchv1.AllowConcurrent
	}))[name]
	o := byName(e.importCfg(importer.Config{}))[name]
	require.Equal(t, importer.ResultImported, o.Result, o.Reason)

	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	w, err := e.client.BatchV1().Jobs(e.ns).Watch(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	defer w.Stop()

	// Switch on a few seconds before a minute boundary, so the adoption and the
	// controller's run for that minute meet.
	now := time.Now()
	if s := now.Second(); s < 56 {
		time.Sleep(time.Duration(56-s)*time.Second - time.Duration(now.Nanosecond()))
	}
	start := time.Now()
	require.Equal(t, synchronizer.ActionAdopt, actions(e.pass(false))[name])
	minute := start.Truncate(time.Minute).Add(time.Minute)
	jobName := func(m time.Time) string { return fmt.Sprintf("%s-%d", name, m.Unix()/60) }

	// Every Job created from now on, by name: the UIDs of its incarnations and owners.
	created := map[string]map[types.UID]types.UID{}
	for created[jobName(minute.Add(time.Minute))] == nil {
		select {
		case ev, ok := <-w.ResultChan():
			require.True(t, ok, "the watch of Jobs ended")
			j, isJob := ev.Object.(*batchv1.Job)
			if ev.Type != watch.Added || !isJob {
				continue
			}
			if created[j.Name] == nil {
				created[j.Name] = map[types.UID]types.UID{}
			}
			owner := types.UID("")
			if ref := metav1.GetControllerOf(j); ref != nil {
				owner = ref.UID
			}
			created[j.Name][j.UID] = owner
		case <-ctx.Done():
			require.FailNow(t, "no Job for the minute after the switch-over", "jobs seen: %v", created)
		}
	}
	runs := created[jobName(minute)]
	require.Len(t, runs, 1, "the run of %s happened exactly once (jobs seen: %v)", minute.Format(time.TimeOnly), created)
	for _, owner := range runs {
		require.Equal(t, cj.UID, owner, "run by the CronJob that was adopted, not by a new one")
	}
	require.Equal(t, cj.UID, e.get(name).UID)
}
