package store_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
)

// lateEvents reads the outbox's lateness events as "kind lateness execution status".
func lateEvents(d *execDB) []string {
	d.t.Helper()
	evs, err := d.s.UnexpandedEvents(d.t.Context(), 100)
	require.NoError(d.t, err)
	var out []string
	for _, e := range evs {
		var p struct {
			Lateness    string `json:"lateness"`
			ExecutionID string `json:"execution_id"`
			Status      string `json:"status"`
		}
		require.NoError(d.t, json.Unmarshal(e.Payload, &p))
		if e.Kind == "job_late" || e.Kind == "job_recovered" {
			require.Equal(d.t, []string{"ops@example.com"}, e.Recipients, "VDK's JobDelay goes to the platform-error contacts")
			out = append(out, e.Kind+" "+p.Lateness+" "+p.ExecutionID+" "+p.Status)
		}
	}
	return out
}

// A run still running its job's notification delay after it started is one job_late
// event, whatever the number of passes; a deposed leader's pass writes none; its end is
// one job_recovered event with its outcome. Guards a hung run going unnoticed, and a mail
// every pass about the same run.
func TestARunRunningPastItsDelayIsOneLateEventAndItsEndOneRecovery(t *testing.T) {
	t.Parallel()
	d := newExecDB(t)
	ctx := t.Context()
	_, err := d.s.UpdateJob(ctx, "team-a", "my-job", func(j job.Job) (job.Job, bool, error) {
		j.Contacts = job.Contacts{NotifiedOnJobFailurePlatformError: []string{"ops@example.com"}}
		j.EnableExecutionNotifications, j.NotificationDelayPeriodMinutes = true, 5
		return j, false, nil
	})
	require.NoError(t, err)
	deployVersion(t, d.s, "my-job", "v1")
	start := time.Now().UTC().Truncate(time.Second)
	require.True(t, d.record(job.ExecutionUpdate{ID: "my-job-1", Status: job.ExecRunning, StartTime: &start}, d.fence))

	require.NoError(t, d.s.RecordLateness(ctx, d.fence, start.Add(4*time.Minute), nil))
	require.Empty(t, lateEvents(d), "4 minutes of a 5-minute delay are not late")
	require.Error(t, d.s.RecordLateness(ctx, job.Fence{Epoch: d.fence.Epoch - 1}, start.Add(6*time.Minute), nil))
	require.Empty(t, lateEvents(d), "a deposed term writes nothing")
	for i := range 3 {
		require.NoError(t, d.s.RecordLateness(ctx, d.fence, start.Add(time.Duration(6+i)*time.Minute), nil))
	}
	require.Equal(t, []string{"job_late run my-job-1 "}, lateEvents(d))

	end := start.Add(10 * time.Minute)
	require.True(t, d.record(job.ExecutionUpdate{ID: "my-job-1", Status: job.ExecUserError, StartTime: &start, EndTime: &end}, d.fence))
	for i := range 3 {
		require.NoError(t, d.s.RecordLateness(ctx, d.fence, end.Add(time.Duration(i)*time.Hour), nil))
	}
	require.Equal(t, []string{"job_late run my-job-1 ", "job_recovered run my-job-1 user_error"}, lateEvents(d))
}

// A late start ends when a scheduled run starts; that run's own "still running" lateness
// counts from then, not from its Job's creation long before (else its start would be told
// as a recovery and a new lateness at once).
func TestALateStartRecoversWhenARunStartsAndThatRunIsLateOnlyAfterItsDelay(t *testing.T) {
	t.Parallel()
	d := newExecDB(t)
	ctx := t.Context()
	_, err := d.s.UpdateJob(ctx, "team-a", "my-job", func(j job.Job) (job.Job, bool, error) {
		j.Contacts = job.Contacts{NotifiedOnJobFailurePlatformError: []string{"ops@example.com"}}
		j.EnableExecutionNotifications, j.NotificationDelayPeriodMinutes = true, 5
		return j, false, nil
	})
	require.NoError(t, err)
	deployVersion(t, d.s, "my-job", "v1")
	anchor := time.Now().UTC().Truncate(time.Minute)
	created := anchor.Add(time.Second)
	require.True(t, d.record(job.ExecutionUpdate{ID: "my-job-1", Status: job.ExecSubmitted, StartTime: &created}, d.fence))
	late := []job.LateStart{{UID: d.job.UID, Anchor: anchor}}
	for range 2 {
		require.NoError(t, d.s.RecordLateness(ctx, d.fence, anchor.Add(30*time.Minute), late))
	}
	require.Equal(t, []string{"job_late start  "}, lateEvents(d))

	require.True(t, d.record(job.ExecutionUpdate{ID: "my-job-1", Status: job.ExecRunning, StartTime: &created}, d.fence))
	seen := anchor.Add(31 * time.Minute)
	for range 2 {
		require.NoError(t, d.s.RecordLateness(ctx, d.fence, seen, late))
	}
	require.Equal(t, []string{"job_late start  ", "job_recovered start my-job-1 running"}, lateEvents(d),
		"one recovery, and the run that started 30 minutes after its Job was made is not late yet")
	require.NoError(t, d.s.RecordLateness(ctx, d.fence, seen.Add(6*time.Minute), nil))
	require.Equal(t, []string{"job_late start  ", "job_recovered start my-job-1 running", "job_late run my-job-1 "}, lateEvents(d))
}

// A run the CronJob controller made (its pod pending, the row submitted) is in the watch
// (issue 45: under the burst a run whose Job was made within its starting deadline is not
// told late while its pod starts), and the watched schedule is the resolved one.
func TestLatenessWatchesCarryTheRunWhoseJobWasMade(t *testing.T) {
	t.Parallel()
	d := newExecDB(t)
	ctx := t.Context()
	_, err := d.s.UpdateJob(ctx, "team-a", "my-job", func(j job.Job) (job.Job, bool, error) {
		j.EnableExecutionNotifications, j.NotificationDelayPeriodMinutes = true, 5
		return j, false, nil
	})
	require.NoError(t, err)
	_, err = d.s.ChangeDeployment(ctx, "team-a", "my-job", func(_ job.Job, _ *job.Deployment) (job.Deployment, error) {
		return job.Deployment{
			JobVersion: "v1", PythonVersion: "3.11", Enabled: true, Schedule: "48 * * * *", HashedSchedule: "H * * * *",
			DeployedBy: "me", DeployedDate: time.Now(),
		}, nil
	})
	require.NoError(t, err)
	st, err := d.s.LoadSyncState(ctx, "my-job")
	require.NoError(t, err)
	a := applied(st)
	a.Schedule = "48 * * * *"
	_, err = d.s.RecordAppliedAll(ctx, d.fence, []job.ActualDeployment{a})
	require.NoError(t, err)

	created := time.Now().UTC().Truncate(time.Second)
	require.True(t, d.record(job.ExecutionUpdate{ID: "my-job-1", Status: job.ExecSubmitted, StartTime: &created}, d.fence))
	watches, err := d.s.LatenessWatches(ctx)
	require.NoError(t, err)
	require.Len(t, watches, 1)
	w := watches[0]
	require.Equal(t, "48 * * * *", w.Schedule)
	require.NotNil(t, w.LastCreated)
	require.True(t, created.Equal(*w.LastCreated), "%v", *w.LastCreated)
	require.False(t, w.Running)
	require.Nil(t, w.LastEnd)
}
