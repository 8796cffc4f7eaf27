package synchronizer_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/synchronizer"
)

// recordSpy passes every call to the real store. At each batch of applied rows it asks
// the apiserver whether each row's CronJob exists as recorded (its UID, at least its
// generation), and it keeps what every batch held and which rows the database took.
type recordSpy struct {
	synchronizer.Store
	client kubernetes.Interface
	ns     string

	// hold, if set, runs once at the start of the first write: a write in flight for as
	// long as it runs, during which the rows handed over wait for the next one.
	hold     func()
	holdOnce sync.Once

	mu         sync.Mutex
	batches    [][]recordedRow
	violations []string
}

type recordedRow struct {
	name  string
	wrote bool
}

func (s *recordSpy) RecordAppliedAll(ctx context.Context, fence job.Fence, as []job.ActualDeployment) ([]bool, error) {
	if s.hold != nil {
		s.holdOnce.Do(s.hold)
	}
	for _, a := range as {
		// The term may be ending (its context cancelled): the check asks Kubernetes anyway.
		cj, err := s.client.BatchV1().CronJobs(s.ns).Get(context.WithoutCancel(ctx), a.JobName, metav1.GetOptions{})
		if err != nil || string(cj.UID) != a.CronJobUID || cj.Generation < a.CronJobGeneration {
			s.mu.Lock()
			s.violations = append(s.violations, fmt.Sprintf("%s recorded (CronJob %s, generation %d) before Kubernetes had it: %v",
				a.JobName, a.CronJobUID, a.CronJobGeneration, err))
			s.mu.Unlock()
		}
	}
	wrote, err := s.Store.RecordAppliedAll(ctx, fence, as)
	if err == nil {
		batch := make([]recordedRow, len(as))
		for i, a := range as {
			batch[i] = recordedRow{name: a.JobName, wrote: wrote[i]}
		}
		s.mu.Lock()
		s.batches = append(s.batches, batch)
		s.mu.Unlock()
	}
	return wrote, err
}

// batchWith returns the first batch that held name, or nil.
func (s *recordSpy) batchWith(name string) []recordedRow {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.batches {
		for _, r := range b {
			if r.name == name {
				return b
			}
		}
	}
	return nil
}

// counts returns the number of batches and of rows the database took.
func (s *recordSpy) counts() (batches, written int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.batches {
		for _, r := range b {
			if r.wrote {
				written++
			}
		}
	}
	return len(s.batches), written
}

func (s *recordSpy) refused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, b := range s.batches {
		for _, r := range b {
			if !r.wrote {
				n++
			}
		}
	}
	return n
}

func (s *recordSpy) checkNoViolation(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Empty(t, s.violations)
}

// spy makes the fixture's synchronizers record through a recordSpy.
func (f *fixture) spy() *recordSpy {
	spy := &recordSpy{client: f.client, ns: f.ns}
	f.wrap = func(db synchronizer.Store) synchronizer.Store {
		spy.Store = db
		return spy
	}
	return spy
}

// deployMany creates and deploys n jobs named prefix-00 and on.
func (f *fixture) deployMany(prefix string, n int) []string {
	f.t.Helper()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%02d", prefix, i)
		f.createJob(names[i])
		f.deploy(names[i], job.DeploymentChange{JobVersion: ptr("v1")})
	}
	return names
}

// holdUntil makes the spy's first write last until the namespace holds n CronJobs: the
// rows of those created meanwhile wait for the next write.
func (f *fixture) holdUntil(spy *recordSpy, n int) {
	spy.hold = func() {
		f.eventually(func() bool {
			l, err := f.client.BatchV1().CronJobs(f.ns).List(context.Background(), metav1.ListOptions{})
			return err == nil && len(l.Items) >= n
		}, "CronJobs created while the first write is in flight")
	}
}

// lastBatch returns the latest batch, or nil.
func (s *recordSpy) lastBatch() []recordedRow {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.batches) == 0 {
		return nil
	}
	return s.batches[len(s.batches)-1]
}

func TestAppliedCronJobsAreRecordedInGroupCommitsAndNeverBeforeKubernetesHasThem(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	spy := f.spy()
	names := f.deployMany("batch", 12)
	held := names[5]
	release := make(chan struct{})
	f.applier.beforeEachCreate = func(cj *batchv1.CronJob) {
		if cj.Name == held {
			<-release // Kubernetes has not confirmed this one yet
		}
	}
	f.holdUntil(spy, len(names)-1)
	f.start()
	for _, name := range names {
		if name != held {
			f.synced(name)
		}
	}
	// Every other job is recorded; the one whose create Kubernetes has not confirmed is not.
	st := f.state(held)
	require.Nil(t, st.Actual)
	require.NotEqual(t, job.StatusSynced, st.Desired.Status)
	require.Nil(t, f.cronJob(held))
	close(release)
	f.synced(held)

	// An idle synchronizer writes a change's row at once, alone: it waits for no company.
	f.patch(names[0], job.DeploymentChange{Enabled: ptr(false)})
	f.eventually(func() bool {
		b := spy.lastBatch()
		return len(b) == 1 && b[0] == recordedRow{name: names[0], wrote: true}
	}, "the change recorded in a batch of its own")
	f.stop()

	spy.checkNoViolation(t)
	batches, written := spy.counts()
	require.Equal(t, len(names)+1, written, "every row written once")
	require.Less(t, batches, written, "rows handed over during a write share the next one")
}

func TestABatchedRowWhoseJobMovedOnIsNotRecordedAndTheOthersLand(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	spy := f.spy()
	names := f.deployMany("moving", 6)
	// The first CronJob applied is written alone; the jobs of the second and third move on
	// after Kubernetes confirmed their CronJobs, while the first write is in flight, and
	// their rows share the next batch with the others.
	var newGeneration, newIncarnation string
	changed := make(chan error, 2)
	var moved atomic.Int32 // the moves done (changed is read by the test meanwhile)
	var mu sync.Mutex
	applied := map[string]bool{}
	f.applier.afterApply = func(cj *batchv1.CronJob) {
		mu.Lock()
		first := !applied[cj.Name]
		applied[cj.Name] = true
		switch {
		case !first:
		case len(applied) == 2:
			newGeneration = cj.Name
		case len(applied) == 3:
			newIncarnation = cj.Name
		}
		gen, inc := newGeneration, newIncarnation
		mu.Unlock()
		if !first {
			return
		}
		// Kubernetes confirmed the CronJob; before its row is written, the job moves on.
		ctx := context.Background()
		switch cj.Name {
		case gen:
			_, err := f.svc.Deploy(ctx, team, cj.Name, job.DeploymentChange{JobVersion: ptr("v2")}, "carol")
			moved.Add(1)
			changed <- err
		case inc:
			err := f.svc.DeleteJob(ctx, team, cj.Name)
			if err == nil {
				_, err = f.svc.CreateJob(ctx, team, job.Job{Name: cj.Name, Team: team, Schedule: "*/5 * * * *"})
			}
			if err == nil {
				_, err = f.svc.Deploy(ctx, team, cj.Name, job.DeploymentChange{JobVersion: ptr("v3")}, "carol")
			}
			moved.Add(1)
			changed <- err
		}
	}
	// The first write lasts until every CronJob exists and both jobs have moved on, so
	// the moved rows are handed over while it is in flight however long the moves take.
	f.holdUntil(spy, len(names))
	untilCronJobs := spy.hold
	spy.hold = func() {
		untilCronJobs()
		f.eventually(func() bool { return moved.Load() == 2 }, "both jobs moved on")
	}
	f.start()
	require.NoError(t, <-changed)
	require.NoError(t, <-changed)
	for _, name := range names {
		f.synced(name)
	}
	f.stop()

	// The batch held the stale rows and others: only the others were written.
	mu.Lock()
	defer mu.Unlock()
	first := spy.batchWith(newGeneration)
	require.Greater(t, len(first), 2, "a batch of several rows")
	landed := 0
	for _, r := range first {
		switch r.name {
		case newGeneration, newIncarnation:
			require.False(t, r.wrote, "%s: the row of a job that moved on is not written", r.name)
		default:
			require.True(t, r.wrote, "%s: the other rows land", r.name)
			landed++
		}
	}
	require.Positive(t, landed)
	spy.checkNoViolation(t)

	// Each was then planned again and ends with its current state applied and recorded.
	st := f.synced(newGeneration)
	require.Equal(t, "v2", st.Desired.JobVersion)
	require.Contains(t, f.cronJob(newGeneration).Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image, "v2")
	st = f.synced(newIncarnation)
	cj := f.cronJob(newIncarnation)
	require.Equal(t, st.Job.UID, cj.Labels[kube.LabelJobUID])
	require.Equal(t, st.Job.UID, st.Actual.JobUID)
	require.Contains(t, cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image, "v3")
}

func TestRowsOfADeposedTermAreNeverRecordedAndTheNextLeaderRecordsThem(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	spy := f.spy()
	names := f.deployMany("deposed", 5)
	var next int64
	takenOver := make(chan error, 1)
	f.holdUntil(spy, len(names))
	created := spy.hold
	spy.hold = func() {
		// Every CronJob is created (each after its intent, under the lease); another
		// replica takes the lease while the first row is being written.
		created()
		ctx := context.Background()
		err := f.db.ReleaseLease(ctx, store.SyncLeaseName, "test", f.epoch)
		if err == nil {
			next, _, err = f.db.TryAcquireLease(ctx, store.SyncLeaseName, "other", time.Hour)
		}
		takenOver <- err
	}
	f.start()
	require.NoError(t, <-takenOver)
	f.eventually(func() bool {
		n, err := f.client.BatchV1().CronJobs(f.ns).List(t.Context(), metav1.ListOptions{})
		return err == nil && len(n.Items) == len(names) && spy.refused() >= len(names)
	}, "every CronJob created and every row refused")
	f.stop()
	_, written := spy.counts()
	require.Zero(t, written)
	uids := map[string]string{}
	for _, name := range names {
		st := f.state(name)
		require.Nil(t, st.Actual, "%s: the deposed term recorded nothing", name)
		require.NotEqual(t, job.StatusSynced, st.Desired.Status, name)
		uids[name] = string(f.cronJob(name).UID)
	}

	// The next leader records what the deposed one applied, without creating anything again.
	f.epoch = next
	f.start()
	for _, name := range names {
		st := f.synced(name)
		require.Equal(t, uids[name], st.Actual.CronJobUID, name)
	}
	f.stop()
	spy.checkNoViolation(t)
}

// A full pass hands its plan (the state it read, the CronJob it rendered) to the creates
// it queues (prefetch.go); a change notified meanwhile is what gets applied.
func TestChangesMadeWhileAConvergeRunsEndApplied(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	names := f.deployMany("converging", 12)
	created := map[string]int{}
	var mu sync.Mutex
	changed := make(chan error, 1)
	var once sync.Once
	var disabled, undeployed string
	f.applier.beforeEachCreate = func(cj *batchv1.CronJob) {
		mu.Lock()
		created[cj.Name]++
		mu.Unlock()
		once.Do(func() {
			// The pass has queued every job; two of those not created yet change now.
			var others []string
			for _, n := range names {
				if n != cj.Name {
					others = append(others, n)
				}
			}
			disabled, undeployed = others[0], others[1]
			ctx := context.Background()
			_, err := f.svc.PatchDeployment(ctx, team, disabled, job.DeploymentChange{Enabled: ptr(false)}, "dave")
			if err == nil {
				err = f.svc.DeleteDeployment(ctx, team, undeployed)
			}
			changed <- err
		})
	}
	f.startWith(synchronizer.Config{Settings: controller.Settings{Workers: 1}})
	require.NoError(t, <-changed)
	for _, name := range names {
		if name != undeployed {
			f.synced(name)
		}
	}
	f.eventually(func() bool {
		st := f.state(undeployed)
		return st.Actual == nil && f.cronJob(undeployed) == nil
	}, "the undeployed job has no CronJob and no actual row")
	f.stop()
	cj := f.cronJob(disabled)
	require.NotNil(t, cj.Spec.Suspend)
	require.True(t, *cj.Spec.Suspend, "the disabled job's CronJob is suspended")
	mu.Lock()
	defer mu.Unlock()
	for _, name := range names {
		require.LessOrEqual(t, created[name], 1, "%s created once", name)
	}
}
