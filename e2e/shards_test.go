package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testenv"
)

// deployFor creates and deploys the job name of team through r.
func (r *replica) deployFor(t *testing.T, team, name string) {
	t.Helper()
	require.Equal(t, http.StatusCreated, r.do(t, http.MethodPost, "/data-jobs/for-team/"+team+"/jobs",
		fmt.Sprintf(`{"job_name":%q,"team":%q,"description":"e2e","config":{"schedule":{"schedule_cron":"0 * * * *"}}}`, name, team)))
	require.Equal(t, http.StatusAccepted, r.do(t, http.MethodPost, "/data-jobs/for-team/"+team+"/jobs/"+name+"/deployments",
		`{"job_version":"v1","enabled":true}`))
}

// holderPid is the pid in the identity holding the live lease name, 0 when none holds it.
func holderPid(t *testing.T, db *store.Store, name string, replicas ...*replica) int {
	t.Helper()
	holder, _, expires, err := db.LeaseHolder(t.Context(), name)
	if err != nil || holder == "" || !expires.After(time.Now()) {
		return 0
	}
	for _, r := range replicas {
		if strings.Contains(holder, fmt.Sprintf("-%d-", r.Cmd.Process.Pid)) {
			return r.Cmd.Process.Pid
		}
	}
	return 0
}

// Two execution targets (issue 44), two replicas: each replica leads one target's shard
// (the second replica, started after the first took both, gets its share when the first
// gives the greater one back), the jobs of each target's team converge in that target's
// namespace, and when the replica leading the second target is SIGKILLed, the survivor
// takes its shard and converges a new job there.
func TestTwoReplicasSplitTwoTargetsAndASurvivorTakesBoth(t *testing.T) {
	t.Parallel()
	dbURL, kubeconfig, ns := testenv.DatabaseURL(t), testenv.Kubeconfig(t), testenv.Namespace(t)
	second := job.Target{Name: "second", Namespace: testenv.Namespace(t), DefaultFor: []string{"team-b"}}
	client := testenv.Clientset(t)
	db, err := store.Open(t.Context(), store.Config{URL: dbURL})
	require.NoError(t, err)
	defer db.Close()
	_, err = db.PutTarget(t.Context(), second)
	require.NoError(t, err)

	a := startReplica(t, dbURL, kubeconfig, ns)
	b := startReplica(t, dbURL, kubeconfig, ns)
	shardLease := store.ShardLeaseName(second.Name)
	require.Eventually(t, func() bool {
		first, other := holderPid(t, db, store.SyncLeaseName, a, b), holderPid(t, db, shardLease, a, b)
		return first != 0 && other != 0 && first != other
	}, 2*time.Minute, 100*time.Millisecond, "each replica leads one shard")

	cronJobIn := func(namespace, name string) bool {
		_, err := client.BatchV1().CronJobs(namespace).Get(context.Background(), name, metav1.GetOptions{})
		return err == nil
	}
	a.deployFor(t, "team-a", "first-target-job")
	b.deployFor(t, "team-b", "second-target-job")
	require.Eventually(t, func() bool {
		return cronJobIn(ns, "first-target-job") && cronJobIn(second.Namespace, "second-target-job") &&
			!cronJobIn(ns, "second-target-job") && !cronJobIn(second.Namespace, "first-target-job")
	}, time.Minute, 50*time.Millisecond, "each job's CronJob in its team's target only")

	victim, survivor := a, b
	if holderPid(t, db, shardLease, a, b) == b.Cmd.Process.Pid {
		victim, survivor = b, a
	}
	require.NoError(t, victim.Cmd.Process.Signal(syscall.SIGKILL))
	killed := time.Now()
	require.Eventually(t, func() bool {
		return holderPid(t, db, shardLease, survivor) == survivor.Cmd.Process.Pid &&
			holderPid(t, db, store.SyncLeaseName, survivor) == survivor.Cmd.Process.Pid
	}, 2*time.Minute, 100*time.Millisecond, "the survivor leads both shards")
	t.Logf("the survivor led both shards %s after the SIGKILL", time.Since(killed).Round(100*time.Millisecond))
	survivor.deployFor(t, "team-b", "after-the-kill")
	require.Eventually(t, func() bool { return cronJobIn(second.Namespace, "after-the-kill") },
		time.Minute, 50*time.Millisecond, "the survivor's shard of the second target converges")
}
