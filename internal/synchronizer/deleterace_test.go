package synchronizer_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/synchronizer"
)

// intentHook passes every call to the real store and runs before, once, right before the
// first intents recorded for name: between the reconcile's read and its write.
type intentHook struct {
	synchronizer.Store
	name   string
	once   sync.Once
	before func()
}

func (h *intentHook) RecordIntents(ctx context.Context, fence job.Fence, is []job.Intent) ([]bool, error) {
	for _, in := range is {
		if in.JobName == h.name {
			h.once.Do(h.before)
		}
	}
	return h.Store.RecordIntents(ctx, fence, is)
}

// The seed's own race (issue 21): a job deleted while the synchronizer writes its CronJob
// must not leave the CronJob behind, whichever step of the write the delete falls between,
// and however few jobs the installation has left (the prune guard holds back orphans
// when the database has no job, or when they are more than a fifth of the CronJobs: a
// deleted job's CronJob held back that way keeps firing its schedule forever).
func TestAJobDeletedWhileItsCronJobIsWrittenLeavesNoCronJob(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		jobs []string
	}{
		{"the installation's last job", []string{"racing-last"}},
		{"one of three jobs", []string{"racing-one", "staying-two", "staying-three"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, step := range []string{"before the intent", "before the create", "after the create, before the record"} {
				t.Run(step, func(t *testing.T) {
					t.Parallel()
					deleteDuringSync(t, tc.jobs, step)
				})
			}
		})
	}
}

// deleteDuringSync deploys jobs, starts a synchronizer and deletes jobs[0] through the
// API at step of the write of its CronJob, then checks what a user would: no CronJob of
// the deleted job, nothing of it left in the database, the others deployed.
func deleteDuringSync(t *testing.T, jobs []string, step string) {
	f := newFixture(t)
	for _, n := range jobs {
		f.createJob(n)
		f.deploy(n, job.DeploymentChange{JobVersion: ptr("v1")})
	}
	victim := jobs[0]
	deleted := make(chan error, 1)
	var once sync.Once
	remove := func() { once.Do(func() { deleted <- f.svc.DeleteJob(context.Background(), team, victim) }) }
	created := make(chan struct{}, 1)
	f.applier.beforeEachCreate = func(cj *batchv1.CronJob) {
		if cj.Name == victim {
			if step == "before the create" {
				remove()
			}
			select {
			case created <- struct{}{}:
			default:
			}
		}
	}
	f.applier.afterApply = func(cj *batchv1.CronJob) {
		if cj.Name == victim && step == "after the create, before the record" {
			remove()
		}
	}
	if step == "before the intent" {
		f.wrap = func(db synchronizer.Store) synchronizer.Store {
			return &intentHook{Store: db, name: victim, before: remove}
		}
	}
	f.start()
	require.NoError(t, <-deleted)
	for _, n := range jobs[1:] {
		f.synced(n)
	}
	f.eventually(func() bool {
		st := f.state(victim)
		return f.cronJob(victim) == nil && st.Actual == nil && len(st.Intents) == 0
	}, "the deleted job's CronJob and intent gone")
	f.stop()
	if step == "before the intent" {
		select {
		case <-created:
			t.Fatal("a CronJob was created for a job deleted before its intent was recorded")
		default:
		}
	}

	// A full pass now finds nothing to delete and nothing it would hold back.
	rep, err := f.synchronizer(false).RunOnce(t.Context(), f.epoch)
	require.NoError(t, err)
	require.Empty(t, rep.Errors)
	require.Nil(t, rep.PruneRefusal)
	require.Len(t, rep.Plans, len(jobs)-1, "plans: %v", rep.Plans)
	for _, p := range rep.Plans {
		require.Equal(t, synchronizer.ActionUnchanged, p.Action, "%s: %s", p.Name, p.Reason)
	}
}
