package e2e

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/testenv"
)

// before0068 takes a database back to the schema before execution targets (migrations
// 0070, 0069 and 0068 undone): what every installation has when it upgrades to them.
const before0068 = `
DROP TABLE execution_target_health;
DELETE FROM schema_migrations WHERE version = 70;
DROP FUNCTION datajobs_job_target(text);
ALTER TABLE desired_data_job_deployment DROP COLUMN execution_target;
DELETE FROM schema_migrations WHERE version = 69;
DROP TRIGGER data_job_execution_fill_target ON data_job_execution;
DROP FUNCTION data_job_execution_fill_target();
DROP TABLE execution_target_team, execution_target, sync_replica;
DROP FUNCTION datajobs_target_of(text);
ALTER TABLE actual_data_job_deployment DROP COLUMN target;
ALTER TABLE cronjob_intent DROP COLUMN target;
ALTER TABLE data_job_execution DROP COLUMN target;
ALTER TABLE leader_lease DROP COLUMN sync_cursor;
DROP SEQUENCE leader_lease_epoch;
DELETE FROM schema_migrations WHERE version = 68;`

// An installation upgraded to execution targets (issue 44) keeps its CronJobs as they are:
// migration 0068 makes every existing actual row, intent and run the default target's,
// serve writes the default target from --namespace, and the first term of the new
// leader rewrites none of the CronJobs the previous one applied (their resourceVersions
// are the same), while it still applies a change made after.
func TestAnUpgradeToTargetsRewritesNoCronJob(t *testing.T) {
	t.Parallel()
	dbURL, kubeconfig, ns := testenv.DatabaseURL(t), testenv.Kubeconfig(t), testenv.Namespace(t)
	client := testenv.Clientset(t)
	ctx := t.Context()
	before := startReplica(t, dbURL, kubeconfig, ns)
	names := make([]string, 5)
	for i := range names {
		names[i] = fmt.Sprintf("before-upgrade-%d", i)
		before.deploy(t, names[i])
	}
	versions := map[string]string{}
	require.Eventually(t, func() bool {
		for _, n := range names {
			cj, err := client.BatchV1().CronJobs(ns).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false
			}
			versions[n] = cj.ResourceVersion
		}
		return true
	}, time.Minute, 50*time.Millisecond, "the CronJobs of before the upgrade")
	require.NoError(t, before.Cmd.Process.Signal(syscall.SIGTERM))
	_ = before.Cmd.Wait()

	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, before0068)
	require.NoError(t, err)

	after := startReplica(t, dbURL, kubeconfig, ns)
	// The versions are compared after the new leader's first full pass, which plans every
	// CronJob: before it, an unchanged version would say nothing.
	require.Eventually(t, func() bool {
		passes, ok := after.metric(`datajobs_sync_passes_total{result="ok",target="default"}`)
		return ok && passes >= 1
	}, time.Minute, 50*time.Millisecond, "the upgraded leader's first full pass")
	after.deploy(t, "after-upgrade")
	require.Eventually(t, func() bool {
		_, err := client.BatchV1().CronJobs(ns).Get(ctx, "after-upgrade", metav1.GetOptions{})
		return err == nil
	}, time.Minute, 50*time.Millisecond, "the upgraded leader applies a change")
	var namespace string
	require.NoError(t, conn.QueryRow(ctx, `SELECT namespace FROM execution_target WHERE name = 'default'`).Scan(&namespace))
	require.Equal(t, ns, namespace, "the default target is serve's --namespace")
	var elsewhere int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM actual_data_job_deployment WHERE target <> 'default'`).Scan(&elsewhere))
	require.Zero(t, elsewhere)
	for _, n := range names {
		cj, err := client.BatchV1().CronJobs(ns).Get(ctx, n, metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, versions[n], cj.ResourceVersion, "CronJob %s rewritten by the upgrade", n)
	}
}
