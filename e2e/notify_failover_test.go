package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testenv"
)

// TestANotificationOfAKilledLeaderIsDeliveredOnceByTheNext: two real replicas; a deploy
// with contacts is applied by the leader, which records its event in the same statement
// as the outcome and is SIGKILLed as soon as that event is committed, before it could
// deliver it (the mail server is down until then, so it cannot have). The survivor takes
// the lease, delivers the event, and the contact has exactly one mail, also after the new
// leader's start-up pass re-applied every job (a failover notifies nobody). Guards an
// event lost with its leader (kept in memory, or written after the state change) and an
// event sent twice (once per leader).
func TestANotificationOfAKilledLeaderIsDeliveredOnceByTheNext(t *testing.T) {
	t.Parallel()
	dbURL, kubeconfig, ns := testenv.DatabaseURL(t), testenv.Kubeconfig(t), testenv.Namespace(t)
	mail := testenv.StartMailpit(t, "")
	require.NoError(t, mail.Stop())
	args := []string{"--lease-duration", "3s", "--smtp-url", "smtp://" + mail.SMTPAddr, "--smtp-from", "datajobs@example.com"}
	a := startReplica(t, dbURL, kubeconfig, ns, args...)
	b := startReplica(t, dbURL, kubeconfig, ns, args...)
	db, err := store.Open(t.Context(), store.Config{URL: dbURL})
	require.NoError(t, err)
	defer db.Close()
	conn, err := pgx.Connect(t.Context(), dbURL)
	require.NoError(t, err)
	defer conn.Close(t.Context())
	count := func(q string) int {
		var n int
		require.NoError(t, conn.QueryRow(t.Context(), q).Scan(&n))
		return n
	}

	holder, epoch := leaseHolder(t, db)
	leader, follower := a, b
	if strings.Contains(holder, fmt.Sprintf("-%d-", b.Cmd.Process.Pid)) {
		leader, follower = b, a
	}
	require.Contains(t, holder, fmt.Sprintf("-%d-", leader.Cmd.Process.Pid), "the lease names one of the two replicas")

	require.Equal(t, http.StatusCreated, follower.do(t, http.MethodPost, "/data-jobs/for-team/team-a/jobs",
		`{"job_name":"told-once","team":"team-a","description":"e2e","config":{"schedule":{"schedule_cron":"0 * * * *"},
		"contacts":{"notified_on_job_deploy":["owner@example.com"]}}}`))
	require.Equal(t, http.StatusAccepted, follower.do(t, http.MethodPost, "/data-jobs/for-team/team-a/jobs/told-once/deployments",
		`{"job_version":"v1","enabled":true}`))
	require.Eventually(t, func() bool {
		return count(`SELECT count(*) FROM notification_event WHERE kind = 'deploy_succeeded' AND job_name = 'told-once'`) == 1
	}, time.Minute, 10*time.Millisecond, "the leader records the deploy's event with its outcome")
	require.NoError(t, leader.Cmd.Process.Signal(syscall.SIGKILL))
	require.Zero(t, count(`SELECT count(*) FROM notification_delivery WHERE state = 'delivered'`), "nothing could be delivered yet")

	require.NoError(t, mail.Start(t.Context()))
	require.Eventually(t, func() bool {
		h, e, _, err := db.LeaseHolder(t.Context(), store.SyncLeaseName)
		return err == nil && e > epoch && strings.Contains(h, fmt.Sprintf("-%d-", follower.Cmd.Process.Pid))
	}, time.Minute, 100*time.Millisecond, "the survivor leads")
	require.Eventually(t, func() bool { return len(testenv.Mails(t, mail.HTTPAddr)) > 0 }, 2*time.Minute, 200*time.Millisecond,
		"the new leader delivers the event")
	// The new leader's passes go on (a pass a second; its start-up pass re-applied the job):
	// no second event, no second mail.
	time.Sleep(5 * time.Second)
	mails := testenv.Mails(t, mail.HTTPAddr)
	require.Len(t, mails, 1, "one mail, not one per leader")
	require.Equal(t, "owner@example.com", mails[0].To[0].Address)
	require.Contains(t, mails[0].Subject, "told-once deployed")
	require.Equal(t, 1, count(`SELECT count(*) FROM notification_event`), "the failover wrote no event")
	require.Equal(t, 1, count(`SELECT count(*) FROM notification_delivery WHERE state = 'delivered'`))
}
