package tracker_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/notify"
	"github.com/datajobs/datajobs/internal/notify/email"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testenv"
)

// lateJob makes name a held job (its pods never get a node) scheduled every minute whose
// CronJob was applied 10 minutes ago, with no run since, a lateness delay of 1 minute and
// ops@example.com as its platform-error contact (VDK's JobDelay recipients). catch_up 1
// makes the leader start the latest missed run late, as a pod that stays pending.
func (f *execFixture) lateJob(name string) {
	f.t.Helper()
	f.heldJob(name)
	f.patch(name, job.DeploymentChange{Schedule: ptr("* * * * *"), Policy: job.PolicyChange{
		StartingDeadlineSeconds: ptr(int64(10)), CatchUp: ptr(1),
	}})
	applied := time.Now().Add(-10 * time.Minute).Truncate(time.Minute).Add(30 * time.Second)
	f.exec(fmt.Sprintf(`INSERT INTO actual_data_job_deployment (data_job_name, job_uid, generation, team,
		deployment_version_sha, git_commit_sha, vdk_version, python_version, schedule, enabled, last_deployed_by, last_deployed_date,
		resources_cpu_request_millis, resources_cpu_limit_millis, resources_memory_request_bytes, resources_memory_limit_bytes)
	SELECT j.name, j.uid, j.generation, j.team, 'h', 'v1', '', '3.11', '* * * * *', true, 'alice', '%s', 1000, 2000, 524288000, 1048576000
	FROM data_job j WHERE j.name = '%s'`, applied.Format(time.RFC3339), name))
	f.exec(`UPDATE data_job SET notification_delay_period_minutes = 1, enable_execution_notifications = true,
		notified_on_job_failure_platform_error = '{ops@example.com}' WHERE name = '` + name + `'`)
}

// query reads one text value of the fixture's database.
func (f *execFixture) query(sql string, args ...any) string {
	f.t.Helper()
	conn, err := pgx.Connect(f.t.Context(), f.dbURL)
	require.NoError(f.t, err)
	defer conn.Close(context.Background())
	var out string
	err = conn.QueryRow(f.t.Context(), sql, args...).Scan(&out)
	require.NoError(f.t, err)
	return out
}

// lateMails delivers what the outbox holds (one dispatcher pass of the fixture's term)
// and returns the mails Mailpit holds about name.
func lateMails(f *execFixture, d *notify.Dispatcher, mail string, name string) []testenv.Mail {
	f.t.Helper()
	require.NoError(f.t, d.Pass(f.t.Context(), job.Fence{Epoch: f.epoch}))
	var out []testenv.Mail
	for _, m := range testenv.Mails(f.t, mail) {
		if strings.Contains(m.Subject, " "+name+" ") {
			out = append(out, m)
		}
	}
	return out
}

// A scheduled job whose run has not started (no node can take its pod) a minute after its
// schedule time is one lateness mail to its platform-error contacts, with the schedule
// time, how late and a console link; more passes and a new leader send no second one; the
// run starting at last is one recovery mail. A suspended job and a job with execution
// notifications off, as late, send nothing. Guards the silence VDK's users met without
// their Alertmanager rules, and the mail every 30 s a check without a key would send.
func TestALateScheduledRunIsOneMailAndItsStartOneRecovery(t *testing.T) {
	t.Parallel()
	f := newExecFixture(t)
	mp := testenv.StartMailpit(t, "")
	sender, err := email.New(email.Config{URL: "smtp://" + mp.SMTPAddr, From: "datajobs@example.com"})
	require.NoError(t, err)
	d := notify.New(notify.Config{
		Channels: map[string]notify.Channel{notify.ChannelEmail: sender}, ConsoleURL: "https://datajobs.example.com",
	}, f.db)
	f.lateJob("late-job")
	f.lateJob("paused-job")
	f.patch("paused-job", job.DeploymentChange{Enabled: ptr(false)})
	f.lateJob("quiet-job")
	f.exec(`UPDATE data_job SET enable_execution_notifications = false WHERE name = 'quiet-job'`)
	f.startExecutions()

	var mails []testenv.Mail
	f.eventually(func() bool { mails = lateMails(f, d, mp.HTTPAddr, "late-job"); return len(mails) > 0 }, "a lateness mail")
	m := mails[0]
	require.Equal(t, "ops@example.com", m.To[0].Address)
	require.Contains(t, m.Subject, "late-job is late: no run started")
	require.Contains(t, m.Text, "Schedule time:")
	require.Contains(t, m.Text, "Allowed delay: 1 minute\r\n")
	require.Contains(t, m.Text, "https://datajobs.example.com/ui/teams/team-a/jobs/late-job")
	require.Contains(t, m.Text, "notification_delay_period_minutes")

	// More passes of this leader, then a new leader's (another term), write nothing twice.
	passes := func() {
		time.Sleep(2 * time.Second) // the check runs every 300 ms here: several passes
	}
	passes()
	f.stopExecutions()
	require.NoError(t, f.db.ReleaseLease(t.Context(), store.SyncLeaseName, "test", f.epoch))
	next, ok, err := f.db.TryAcquireLease(t.Context(), store.SyncLeaseName, "other", time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	f.epoch = next
	f.startExecutions()
	passes()
	require.Len(t, lateMails(f, d, mp.HTTPAddr, "late-job"), 1, "one lateness mail across passes and leaders")
	for _, name := range []string{"paused-job", "quiet-job"} {
		require.Equal(t, "0", f.query(`SELECT count(*)::text FROM notification_event WHERE job_name = $1 AND kind LIKE 'job_%'`, name),
			"%s: a suspended job, or one with execution notifications off, is told nothing", name)
		require.Empty(t, lateMails(f, d, mp.HTTPAddr, name), name)
	}

	// The run the leader started late gets a node at last: it runs, and the job recovered.
	var id string
	f.eventually(func() bool {
		id = f.query(`SELECT COALESCE(max(id), '') FROM data_job_execution WHERE job_name = 'late-job' AND logical_time IS NOT NULL`)
		return id != ""
	}, "the catch-up run")
	f.kubelet(f.pod(id), corev1.PodRunning, running(), "")
	f.status("late-job", id, job.ExecRunning)
	f.eventually(func() bool { return len(lateMails(f, d, mp.HTTPAddr, "late-job")) == 2 }, "a recovery mail")
	mails = lateMails(f, d, mp.HTTPAddr, "late-job")
	var subjects []string
	for _, m := range mails {
		subjects = append(subjects, m.Subject)
	}
	require.Contains(t, strings.Join(subjects, "\n"), "late-job recovered: execution "+id+" started")
	passes()
	require.Len(t, lateMails(f, d, mp.HTTPAddr, "late-job"), 2, "one recovery mail")
}
