package e2e

import (
	"context"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/testenv"
)

// The seed's own race with the worst timing (issue 21): the leader created the CronJob
// and is killed before it recorded it, and the job is deleted. The job was the
// installation's last, so an orphan would be held back by the prune guard (no data job
// at all) and keep firing the deleted job's schedule; the intent the leader recorded
// before the create makes it a known deletion, which the next leader carries out.
//
// The record is held in flight by a lock on the actual table (SHARE mode: reads go on,
// the leader's insert waits), the way a slow database would hold it; once the CronJob
// exists, the leader is SIGKILLed and its waiting statement ended with it (PostgreSQL
// notices a dead client only when it next talks to it).
func TestLeaderKilledBetweenTheCreateAndTheRecordOfADeletedJobLeavesNoCronJob(t *testing.T) {
	t.Parallel()
	dbURL, kubeconfig, ns := testenv.DatabaseURL(t), testenv.Kubeconfig(t), testenv.Namespace(t)
	client := testenv.Clientset(t)
	ctx := t.Context()

	hold, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer hold.Close(context.Background())
	tx, err := hold.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(context.Background()) //nolint:errcheck // released below; a no-op then
	_, err = tx.Exec(ctx, `LOCK TABLE actual_data_job_deployment IN SHARE MODE`)
	require.NoError(t, err)

	first := startReplica(t, dbURL, kubeconfig, ns, "--lease-duration", "3s")
	const name = "killed-race"
	first.deploy(t, name)
	cronJobExists := func() bool {
		_, err := client.BatchV1().CronJobs(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Logf("get cronjob %s: %v", name, err)
		}
		return err == nil
	}
	require.Eventually(t, cronJobExists, time.Minute, 20*time.Millisecond, "the leader creates the CronJob")
	var waiting []int32
	require.Eventually(t, func() bool {
		rows, _ := hold.Query(ctx, `SELECT l.pid FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
			WHERE c.relname = 'actual_data_job_deployment' AND NOT l.granted
			AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`)
		waiting, err = pgx.CollectRows(rows, pgx.RowTo[int32])
		return err == nil && len(waiting) == 1
	}, time.Minute, 20*time.Millisecond, "the leader's record waits")

	// The job is deleted while its applied row is in flight, and the leader dies with it.
	require.Equal(t, http.StatusOK, first.do(t, http.MethodDelete, "/data-jobs/for-team/team-a/jobs/"+name, ""))
	require.NoError(t, first.Cmd.Process.Signal(syscall.SIGKILL))
	_, _ = first.Cmd.Process.Wait()
	var ended bool
	require.NoError(t, hold.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, waiting[0]).Scan(&ended))
	require.True(t, ended)
	require.NoError(t, tx.Rollback(ctx))
	require.True(t, cronJobExists(), "the dead leader's CronJob is there, recorded nowhere but in its intent")

	next := startReplica(t, dbURL, kubeconfig, ns, "--lease-duration", "3s")
	require.Eventually(t, func() bool { return !cronJobExists() }, 2*time.Minute, 100*time.Millisecond,
		"the next leader deletes the deleted job's CronJob")
	require.NotContains(t, next.Logs(), "prune_refused", "a known deletion is never held back as an orphan")
	require.Eventually(t, func() bool {
		var left int
		err := hold.QueryRow(ctx, `SELECT (SELECT count(*) FROM cronjob_intent) + (SELECT count(*) FROM actual_data_job_deployment)`).Scan(&left)
		return err == nil && left == 0
	}, time.Minute, 50*time.Millisecond, "nothing of the deleted job is left in the database")
	require.NotContains(t, next.Logs(), "prune_refused")
}
