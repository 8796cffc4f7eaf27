package synchronizer_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/synchronizer"
)

// restoreTables are the tables a backup holds that the synchronizer reads, in the order
// their rows can be inserted again.
var restoreTables = []string{"data_job", "desired_data_job_deployment", "actual_data_job_deployment", "cronjob_intent"}

// backup copies the synchronizer's tables and the revision sequence into schema name, as
// a backup of the database taken now would hold them.
func (f *fixture) backup(name string) {
	f.t.Helper()
	sql := "CREATE SCHEMA " + name + ";"
	for _, t := range restoreTables {
		sql += "CREATE TABLE " + name + "." + t + " AS SELECT * FROM public." + t + ";"
	}
	sql += "CREATE TABLE " + name + ".revision AS SELECT last_value, is_called FROM data_job_revision_seq;"
	f.exec(sql)
}

// restore puts the database back to backup name, sequence included, as restoring an
// older backup (pg_restore, a point-in-time recovery) does.
func (f *fixture) restore(name string) {
	f.t.Helper()
	sql := "TRUNCATE " + strings.Join(restoreTables, ", ") + " CASCADE;"
	for _, t := range restoreTables {
		sql += "INSERT INTO public." + t + " SELECT * FROM " + name + "." + t + ";"
	}
	sql += "SELECT setval('data_job_revision_seq', last_value, is_called) FROM " + name + ".revision;"
	f.exec(sql)
}

// lives reads the named CronJobs.
func (f *fixture) lives(names ...string) map[string]*batchv1.CronJob {
	out := map[string]*batchv1.CronJob{}
	for _, n := range names {
		cj := f.cronJob(n)
		require.NotNil(f.t, cj, n)
		out[n] = cj
	}
	return out
}

// The attack, or the accident: the database is restored from a backup older than the
// cluster. Without the guard the first pass rolls back every job changed since the backup
// (its CronJob goes back to the old version), re-creates every job deleted since, and
// prunes every job created since (few enough to pass the prune guard). With it nothing is
// written until the operator accepts the restore; then the CronJobs converge on the
// restored database and carry its revisions again.
func TestRestoredOlderBackupRollsNothingBackDeletesNothingUntilAccepted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	steady := []string{"steady-one", "steady-two", "steady-three", "steady-four", "steady-five", "steady-six"}
	f.deployed(append([]string{"changed-since", "deleted-since"}, steady...)...)
	f.backup("nightly")

	// After the backup: one job redeployed, one deleted, one created.
	f.deploy("changed-since", job.DeploymentChange{JobVersion: ptr("v2")})
	f.createJob("created-since")
	f.deploy("created-since", job.DeploymentChange{JobVersion: ptr("v1")})
	require.NoError(t, f.svc.DeleteJob(t.Context(), team, "deleted-since"))
	f.start()
	f.synced("changed-since")
	f.synced("created-since")
	f.eventually(func() bool { return f.cronJob("deleted-since") == nil }, "deleted-since's CronJob deleted")
	f.stop()
	before := f.lives(append([]string{"changed-since", "created-since"}, steady...)...)
	require.Equal(t, "v2", before["changed-since"].Annotations[kube.AnnotationJobVersion])

	f.restore("nightly")

	t.Run("a replica writes nothing and says why", func(t *testing.T) {
		s := f.synchronizer(false)
		rep, err := s.RunOnce(t.Context(), f.epoch)
		require.NoError(t, err)
		require.Empty(t, rep.Errors)
		require.NotNil(t, rep.RestoreRefusal)
		require.Equal(t, 2, rep.RestoreRefusal.Newer, "changed-since and created-since are newer than the restored rows")
		require.Equal(t, "restore detected: 2 CronJobs newer than the database; start with --sync-mode dry-run, check, then --accept-restore", rep.RestoreRefusal.Reason)
		require.Equal(t, rep.RestoreRefusal, s.Safety().RestoreRefused, "the /healthz detail shows it")
		for _, p := range rep.Plans {
			require.NotContains(t, []synchronizer.Action{synchronizer.ActionCreate, synchronizer.ActionUpdate, synchronizer.ActionDelete, synchronizer.ActionOrphan}, p.Action, "%s: %s", p.Name, p.Reason)
		}
		f.unchanged(before)
		require.Nil(t, f.cronJob("deleted-since"), "the job deleted since the backup is not re-created")
	})

	t.Run("a running replica keeps refusing its single reconciles too", func(t *testing.T) {
		f.startWith(synchronizer.Config{})
		f.patch("steady-one", job.DeploymentChange{Enabled: ptr(false)}) // a NOTIFY: a single reconcile
		require.Never(t, func() bool { return f.state("steady-one").Desired.Status == job.StatusSynced }, 3*time.Second, 100*time.Millisecond,
			"the disable is not applied (without the guard it is, within milliseconds)")
		f.stop()
		f.unchanged(before)
	})

	t.Run("dry-run shows the rollback that accepting would do", func(t *testing.T) {
		s := f.synchronizer(true)
		rep, err := s.RunOnce(t.Context(), f.epoch)
		require.NoError(t, err)
		require.NotNil(t, s.Safety().RestoreRefused)
		planned := map[string]synchronizer.Action{}
		for _, p := range rep.Plans {
			planned[p.Name] = p.Action
		}
		require.Equal(t, synchronizer.ActionUpdate, planned["changed-since"], "back to v1")
		require.Equal(t, synchronizer.ActionCreate, planned["deleted-since"])
		require.Equal(t, synchronizer.ActionOrphan, planned["created-since"])
		f.unchanged(before)
	})

	t.Run("accepted, the cluster converges on the restored database", func(t *testing.T) {
		rep, err := f.synchronizerWith(synchronizer.Config{AcceptRestore: true}).RunOnce(t.Context(), f.epoch)
		require.NoError(t, err)
		require.Empty(t, rep.Errors)
		require.Nil(t, rep.RestoreRefusal)
		f.synced("changed-since")
		require.Equal(t, "v1", f.cronJob("changed-since").Annotations[kube.AnnotationJobVersion])
		f.synced("deleted-since")
		f.eventually(func() bool { return f.cronJob("created-since") == nil }, "created-since pruned")
		for _, n := range []string{"changed-since", "steady-two"} {
			rev, ok := kube.Revision(f.cronJob(n))
			require.True(t, ok)
			require.Equal(t, f.state(n).Job.Revision, rev, "%s re-stamped with its row's revision", n)
		}

		// Accepted once: a replica without the flag finds nothing newer any more.
		s := f.synchronizer(false)
		rep, err = s.RunOnce(t.Context(), f.epoch)
		require.NoError(t, err)
		require.Nil(t, rep.RestoreRefusal)
		require.Nil(t, s.Safety().RestoreRefused)
	})
}

// A CronJob applied and not yet recorded (the leader died between the two) carries its
// row's revision, not a newer one: a crash is not a restore.
func TestCrashBetweenApplyAndRecordIsNoRestore(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.deployed("applied-unrecorded")
	f.exec(`DELETE FROM actual_data_job_deployment WHERE data_job_name = 'applied-unrecorded'`)
	s := f.synchronizer(false)
	rep, err := s.RunOnce(t.Context(), f.epoch)
	require.NoError(t, err)
	require.Nil(t, rep.RestoreRefusal)
	require.Equal(t, 1, rep.Summary()[synchronizer.ActionRecord], "plans: %v", rep.Plans)
}
