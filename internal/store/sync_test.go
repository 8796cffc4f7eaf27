package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testenv"
)

// deployVersion creates the job if needed and deploys version of it.
func deployVersion(t *testing.T, st *store.Store, name, version string) job.SyncState {
	t.Helper()
	ctx := t.Context()
	if s, err := st.LoadSyncState(ctx, name); err == nil && s.Job == nil {
		_, err := st.CreateJob(ctx, job.Job{Name: name, Team: "team-a"})
		require.NoError(t, err)
	}
	_, err := st.ChangeDeployment(ctx, "team-a", name, func(_ job.Job, _ *job.Deployment) (job.Deployment, error) {
		return job.Deployment{JobVersion: version, PythonVersion: "3.11", Enabled: true, DeployedBy: "me", DeployedDate: time.Now()}, nil
	})
	require.NoError(t, err)
	s, err := st.LoadSyncState(ctx, name)
	require.NoError(t, err)
	return s
}

// applied is the actual row a synchronizer records for the state's current generation.
func applied(s job.SyncState) job.ActualDeployment {
	return job.ActualDeployment{
		JobName: s.Name, JobUID: s.Job.UID, Generation: s.Job.Generation, Team: s.Job.Team, DeploymentVersionSHA: "sha-" + s.Desired.JobVersion,
		JobVersion: s.Desired.JobVersion, PythonVersion: s.Desired.PythonVersion, Enabled: true, DeployedBy: "me",
		DeployedDate: time.Now(), CronJobGeneration: 1, CronJobUID: "cj-" + s.Name,
	}
}

// recorded says whether the state's current generation is recorded as applied and synced.
func recorded(t *testing.T, st *store.Store, name string) bool {
	t.Helper()
	s, err := st.LoadSyncState(t.Context(), name)
	require.NoError(t, err)
	return s.Actual != nil && s.Actual.JobUID == s.Job.UID && s.Actual.Generation == s.Job.Generation &&
		s.Desired.Status == job.StatusSynced && s.Desired.StatusGeneration == s.Job.Generation
}

func TestRecordAppliedAllWritesOnlyTheRowsStillCurrentAndTheOthersLand(t *testing.T) {
	t.Parallel()
	st, ctx := testenv.Store(t), t.Context()
	epoch, ok, err := st.TryAcquireLease(ctx, store.SyncLeaseName, "a", time.Hour)
	require.NoError(t, err)
	require.True(t, ok)

	current := deployVersion(t, st, "current", "v1")
	oldGen := applied(deployVersion(t, st, "old-generation", "v1"))
	deployVersion(t, st, "old-generation", "v2") // a new deploy while v1 was being applied
	otherUID := applied(deployVersion(t, st, "other-incarnation", "v1"))
	otherUID.JobUID = "6f1c0c6e-0000-4000-8000-000000000000" // the name's previous incarnation
	alsoCurrent := deployVersion(t, st, "also-current", "v1")

	wrote, err := st.RecordAppliedAll(ctx, job.Fence{Epoch: epoch},
		[]job.ActualDeployment{applied(current), oldGen, otherUID, applied(alsoCurrent)})
	require.NoError(t, err)
	require.Equal(t, []bool{true, false, false, true}, wrote)
	require.True(t, recorded(t, st, "current"))
	require.True(t, recorded(t, st, "also-current"))
	for _, name := range []string{"old-generation", "other-incarnation"} {
		s, err := st.LoadSyncState(ctx, name)
		require.NoError(t, err)
		require.Nil(t, s.Actual, "%s: a stale row in the batch writes nothing", name)
		require.NotEqual(t, job.StatusSynced, s.Desired.Status, name)
	}
}

func TestRecordAppliedAllOfADeposedTermWritesNothing(t *testing.T) {
	t.Parallel()
	st, ctx := testenv.Store(t), t.Context()
	old, ok, err := st.TryAcquireLease(ctx, store.SyncLeaseName, "a", time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	batch := []job.ActualDeployment{applied(deployVersion(t, st, "one", "v1")), applied(deployVersion(t, st, "two", "v1"))}

	require.NoError(t, st.ReleaseLease(ctx, store.SyncLeaseName, "a", old))
	next, ok, err := st.TryAcquireLease(ctx, store.SyncLeaseName, "b", time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	wrote, err := st.RecordAppliedAll(ctx, job.Fence{Epoch: old}, batch)
	require.NoError(t, err)
	require.Equal(t, []bool{false, false}, wrote)
	require.False(t, recorded(t, st, "one"))
	require.False(t, recorded(t, st, "two"))

	wrote, err = st.RecordAppliedAll(ctx, job.Fence{Epoch: next}, batch)
	require.NoError(t, err)
	require.Equal(t, []bool{true, true}, wrote, "the same batch lands under the term that holds the lease")
	require.True(t, recorded(t, st, "one"))
}

func TestRecordAppliedAllRefusesTwoRowsOfOneName(t *testing.T) {
	t.Parallel()
	st, ctx := testenv.Store(t), t.Context()
	epoch, ok, err := st.TryAcquireLease(ctx, store.SyncLeaseName, "a", time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	a := applied(deployVersion(t, st, "twice", "v1"))
	_, err = st.RecordAppliedAll(ctx, job.Fence{Epoch: epoch}, []job.ActualDeployment{a, a})
	require.ErrorContains(t, err, "twice appears twice")
	require.False(t, recorded(t, st, "twice"))
}
