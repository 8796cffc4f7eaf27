package server_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/server"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testenv"
)

// With --vdk-job-metrics a scrape of /metrics holds VDK's alerting gauges with VDK's
// names, labels and values, so Alertmanager rules written for VDK (JobDelay joins
// taurus_datajob_info{email_notified_on_platform_error!=""} with
// taurus_datajob_notification_delay) keep working: the contacts joined by ";", empty when
// execution notifications are off; the delay in minutes; the latest execution that is not
// skipped as VDK's alert value. Without the flag, none of them (they label by job).
func TestVDKJobMetricsAreScrapedWithVDKsNamesLabelsAndValues(t *testing.T) {
	t.Parallel()
	url := testenv.DatabaseURL(t)
	db, err := store.Open(t.Context(), store.Config{URL: url})
	require.NoError(t, err)
	defer db.Close()
	ctx := t.Context()
	loud, err := db.CreateJob(ctx, job.Job{
		Name: "loud-job", Team: "team-a", EnableExecutionNotifications: true, NotificationDelayPeriodMinutes: 90,
		Contacts: job.Contacts{
			NotifiedOnJobSuccess: []string{"ok@example.com"}, NotifiedOnJobFailureUserError: []string{"dev@example.com"},
			NotifiedOnJobFailurePlatformError: []string{"ops@example.com", "oncall@example.com"},
		},
	})
	require.NoError(t, err)
	_, err = db.CreateJob(ctx, job.Job{
		Name: "quiet-job", Team: "team-b", NotificationDelayPeriodMinutes: 240,
		Contacts: job.Contacts{NotifiedOnJobFailurePlatformError: []string{"ops@example.com"}},
	})
	require.NoError(t, err)
	epoch, ok, err := db.TryAcquireLease(ctx, store.SyncLeaseName, "test", time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	start := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	end, later := start.Add(time.Minute), start.Add(30*time.Minute)
	_, err = db.RecordExecutions(ctx, job.Fence{Epoch: epoch}, []job.ExecutionUpdate{
		{
			ID: "loud-job-1", JobName: "loud-job", JobUID: loud.UID, Type: job.ExecScheduled, OpID: "op-1",
			Status: job.ExecUserError, StartTime: &start, EndTime: &end,
		},
		{
			ID: "loud-job-2", JobName: "loud-job", JobUID: loud.UID, Type: job.ExecScheduled, OpID: "op-2",
			Status: job.ExecSkipped, StartTime: &later, EndTime: &later,
		},
	})
	require.NoError(t, err)

	_, _, admin := serve(t, server.Config{
		DatabaseURL: url, SyncMode: server.SyncOff,
		Notifications: server.NotificationsConfig{VDKJobMetrics: true},
	})
	code, body := get(t, admin+"/metrics")
	require.Equal(t, http.StatusOK, code)
	for _, want := range []string{
		"# TYPE taurus_datajob_info gauge",
		`taurus_datajob_info{data_job="loud-job",email_notified_on_platform_error="ops@example.com;oncall@example.com",email_notified_on_success="ok@example.com",email_notified_on_user_error="dev@example.com",team="team-a"} 1`,
		`taurus_datajob_info{data_job="quiet-job",email_notified_on_platform_error="",email_notified_on_success="",email_notified_on_user_error="",team="team-b"} 1`,
		"# TYPE taurus_datajob_notification_delay gauge",
		`taurus_datajob_notification_delay{data_job="loud-job"} 90`,
		`taurus_datajob_notification_delay{data_job="quiet-job"} 240`,
		"# TYPE taurus_datajob_termination_status gauge",
		`taurus_datajob_termination_status{data_job="loud-job",execution_id="loud-job-1"} 3`,
	} {
		require.Contains(t, body, want+"\n")
	}
	require.NotContains(t, body, `taurus_datajob_termination_status{data_job="quiet-job"`, "a job that never ran has no termination status")

	_, _, plain := serve(t, server.Config{DatabaseURL: url, SyncMode: server.SyncOff})
	_, body = get(t, plain+"/metrics")
	require.NotContains(t, body, "taurus_", "off by default")
	require.Contains(t, body, "go_goroutines", "the scrape itself worked")
}
