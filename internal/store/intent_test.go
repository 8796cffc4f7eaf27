package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testenv"
)

// An intent is what makes a CronJob written for a job deleted meanwhile a known
// deletion (DESIGN invariant 10): it is written only for the incarnation, generation and
// lease the write was planned under, it outlives the job, and it ends once the applied
// row takes over or the CronJob is gone.
func TestAnIntentIsWrittenOnlyForTheCurrentJobAndOutlivesItsDelete(t *testing.T) {
	t.Parallel()
	st, ctx := testenv.Store(t), t.Context()
	epoch, ok, err := st.TryAcquireLease(ctx, store.SyncLeaseName, "a", time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	fence := job.Fence{Epoch: epoch}
	intend := func(fence job.Fence, s job.SyncState, gen int64) (bool, error) {
		t.Helper()
		wrote, err := st.RecordIntents(ctx, fence, []job.Intent{{JobName: s.Name, JobUID: s.Job.UID, Generation: gen}})
		if err != nil {
			return false, err
		}
		return wrote[0], nil
	}
	intents := func(name string) []string {
		t.Helper()
		s, err := st.LoadSyncState(ctx, name)
		require.NoError(t, err)
		return s.Intents
	}

	s := deployVersion(t, st, "intended", "v1")
	wrote, err := intend(fence, s, s.Job.Generation-1)
	require.NoError(t, err)
	require.False(t, wrote, "a generation that moved on: plan again first")
	wrote, err = intend(job.Fence{Epoch: epoch + 1}, s, s.Job.Generation)
	require.NoError(t, err)
	require.False(t, wrote, "a term that does not hold the lease writes nothing")
	wrote, err = intend(fence, s, s.Job.Generation)
	require.NoError(t, err)
	require.True(t, wrote)
	wrote, err = intend(fence, s, s.Job.Generation)
	require.NoError(t, err)
	require.True(t, wrote, "written again (a retried create) it is still there")
	require.Equal(t, []string{s.Job.UID}, intents(s.Name))

	// The job is deleted: the intent stays, alone, until the CronJob is confirmed gone.
	require.NoError(t, st.DeleteJob(ctx, "team-a", s.Name))
	gone, err := st.LoadSyncState(ctx, s.Name)
	require.NoError(t, err)
	require.Nil(t, gone.Job)
	require.Equal(t, []string{s.Job.UID}, gone.Intents)
	all, err := st.LoadAllSyncStates(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{s.Job.UID}, all[s.Name].Intents, "a full pass sees it too")
	wrote, err = intend(fence, s, s.Job.Generation)
	require.NoError(t, err)
	require.False(t, wrote, "no intent for a deleted job: its CronJob must not be written")
	_, err = st.DeleteActual(ctx, fence, s.Name, s.Job.UID)
	require.NoError(t, err)
	require.Empty(t, intents(s.Name))

	// The applied row of the name takes over from its intent.
	s = deployVersion(t, st, "intended", "v1") // a new incarnation of the name
	wrote, err = intend(fence, s, s.Job.Generation)
	require.NoError(t, err)
	require.True(t, wrote)
	applied, err := st.RecordAppliedAll(ctx, fence, []job.ActualDeployment{applied(s)})
	require.NoError(t, err)
	require.Equal(t, []bool{true}, applied)
	require.Empty(t, intents(s.Name))

	// A full pass writes the intents of its creates in one statement: each is checked alone.
	b := deployVersion(t, st, "intended-too", "v1")
	both, err := st.RecordIntents(ctx, fence, []job.Intent{
		{JobName: b.Name, JobUID: b.Job.UID, Generation: b.Job.Generation},
		{JobName: s.Name, JobUID: s.Job.UID, Generation: s.Job.Generation - 1},
	})
	require.NoError(t, err)
	require.Equal(t, []bool{true, false}, both)
	require.Equal(t, []string{b.Job.UID}, intents(b.Name))
	require.Empty(t, intents(s.Name))
}
