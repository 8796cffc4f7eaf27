package store_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testenv"
)

// events reads the outbox's events as "kind job recipients".
func events(t *testing.T, st *store.Store) []string {
	t.Helper()
	evs, err := st.UnexpandedEvents(t.Context(), 100)
	require.NoError(t, err)
	var out []string
	for _, e := range evs {
		out = append(out, e.Kind+" "+e.JobName+" "+strings.Join(e.Recipients, ","))
	}
	return out
}

// A person's deploy is one event to the deploy contacts; a resync or a new leader that
// writes the same applied row again (the failover case) records none, and a deposed
// leader's write, which does not commit its state change, invents none.
func TestADeployIsOneEventAndItsResyncOrFailoverNone(t *testing.T) {
	t.Parallel()
	st, ctx := testenv.Store(t), t.Context()
	_, err := st.CreateJob(ctx, job.Job{Name: "deployed", Team: "team-a", Contacts: job.Contacts{NotifiedOnJobDeploy: []string{"ops@example.com"}}})
	require.NoError(t, err)
	s := deployVersion(t, st, "deployed", "v1")
	epoch, ok, err := st.TryAcquireLease(ctx, store.SyncLeaseName, "a", time.Hour)
	require.NoError(t, err)
	require.True(t, ok)

	_, err = st.RecordAppliedAll(ctx, job.Fence{Epoch: epoch - 1}, []job.ActualDeployment{applied(s)})
	require.NoError(t, err)
	require.Empty(t, events(t, st), "a deposed term's write records no event")

	for range 2 { // the apply, then a resync (or the next leader) writing it again
		_, err = st.RecordAppliedAll(ctx, job.Fence{Epoch: epoch}, []job.ActualDeployment{applied(s)})
		require.NoError(t, err)
	}
	require.Equal(t, []string{"deploy_succeeded deployed ops@example.com"}, events(t, st))

	s = deployVersion(t, st, "deployed", "v2")
	for range 2 { // a failure, then a retry that fails the same way
		_, err = st.RecordUnappliedStatus(ctx, job.Fence{Epoch: epoch}, "deployed", s.Job.UID, s.Job.Generation, job.StatusUserError, "bad schedule")
		require.NoError(t, err)
		_, err = st.RecordUnappliedStatus(ctx, job.Fence{Epoch: epoch}, "deployed", s.Job.UID, s.Job.Generation, job.StatusBuilding, "")
		require.NoError(t, err)
	}
	require.Equal(t, []string{"deploy_succeeded deployed ops@example.com", "deploy_failed deployed ops@example.com"}, events(t, st))
}

// A run's final status is one event, to the contacts of its outcome, with the end of its
// log; a job with execution notifications off records none.
func TestAFinishedRunIsOneEventToTheContactsOfItsOutcomeUnlessNotificationsAreOff(t *testing.T) {
	t.Parallel()
	d := newExecDB(t)
	ctx := t.Context()
	_, err := d.s.UpdateJob(ctx, "team-a", "my-job", func(j job.Job) (job.Job, bool, error) {
		j.Contacts = job.Contacts{NotifiedOnJobFailureUserError: []string{"dev@example.com"}, NotifiedOnJobSuccess: []string{"happy@example.com"}}
		j.EnableExecutionNotifications = true
		return j, false, nil
	})
	require.NoError(t, err)
	start := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	end := start.Add(30 * time.Second)
	var log strings.Builder
	for i := range 100 {
		log.WriteString("line " + string(rune('a'+i%26)) + "\n")
	}
	run := job.ExecutionUpdate{ID: "my-job-1", Status: job.ExecRunning, StartTime: &start}
	require.True(t, d.record(run, d.fence))
	require.Empty(t, events(t, d.s), "a running status is no event")
	run.Status, run.Message, run.EndTime, run.Log = job.ExecUserError, "exit 1", &end, &job.StoredLog{Logs: log.String()}
	require.True(t, d.record(run, d.fence))
	require.False(t, d.record(run, d.fence))
	evs, err := d.s.UnexpandedEvents(ctx, 10)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	require.Equal(t, []string{"dev@example.com"}, evs[0].Recipients)
	var p struct {
		Message  string `json:"message"`
		LogTail  string `json:"log_tail"`
		Duration int    `json:"duration_seconds"`
	}
	require.NoError(t, json.Unmarshal(evs[0].Payload, &p))
	require.Equal(t, 30, p.Duration)
	require.Equal(t, "exit 1", p.Message)
	require.Len(t, strings.Split(p.LogTail, "\n"), job.NotificationLogLines, "the last 20 lines, not the log")

	_, err = d.s.UpdateJob(ctx, "team-a", "my-job", func(j job.Job) (job.Job, bool, error) {
		j.EnableExecutionNotifications = false
		return j, false, nil
	})
	require.NoError(t, err)
	quiet := job.ExecutionUpdate{ID: "my-job-2", Status: job.ExecSucceeded, StartTime: &start, EndTime: &end}
	require.True(t, d.record(quiet, d.fence))
	evs, err = d.s.UnexpandedEvents(ctx, 10)
	require.NoError(t, err)
	require.Len(t, evs, 1, "enable_execution_notifications: false records no event")
}

// The tracker records a run's final status before it has read the pod's log (the log row
// is pending then), so the event written with the status had no log lines and no mail
// ever quoted one (seen after the log window fix: log_tail was ” for every real run).
// The event now waits for the kept log, and the statement that keeps it fills its lines.
func TestAFinishedRunsEventWaitsForItsLogAndQuotesItsLastLines(t *testing.T) {
	t.Parallel()
	d := newExecDB(t)
	ctx := t.Context()
	_, err := d.s.UpdateJob(ctx, "team-a", "my-job", func(j job.Job) (job.Job, bool, error) {
		j.Contacts = job.Contacts{NotifiedOnJobFailureUserError: []string{"dev@example.com"}}
		j.EnableExecutionNotifications = true
		return j, false, nil
	})
	require.NoError(t, err)
	start := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	end := start.Add(30 * time.Second)
	run := job.ExecutionUpdate{ID: "my-job-7", Status: job.ExecUserError, Message: "exit 1", StartTime: &start, EndTime: &end, Log: &job.StoredLog{Pending: true}}
	require.True(t, d.record(run, d.fence))
	evs, err := d.s.UnexpandedEvents(ctx, 10)
	require.NoError(t, err)
	require.Empty(t, evs, "held back while the log is pending")

	var log strings.Builder
	for i := range 30 {
		fmt.Fprintf(&log, "step line %d\n", i)
	}
	kept, err := d.s.StoreExecutionLog(ctx, d.fence, "my-job-7", job.StoredLog{Logs: log.String()})
	require.NoError(t, err)
	require.True(t, kept)
	evs, err = d.s.UnexpandedEvents(ctx, 10)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	var p struct {
		LogTail string `json:"log_tail"`
	}
	require.NoError(t, json.Unmarshal(evs[0].Payload, &p))
	require.Contains(t, p.LogTail, "step line 29")
	require.NotContains(t, p.LogTail, "step line 9\n", "the last 20 lines only")
}
