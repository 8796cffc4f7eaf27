package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testenv"
)

// execDB is a store with one job and the synchronizer lease held.
type execDB struct {
	t     *testing.T
	s     *store.Store
	url   string
	job   job.Job
	fence job.Fence
}

func newExecDB(t *testing.T) *execDB {
	t.Helper()
	url := testenv.DatabaseURL(t)
	s, err := store.Open(t.Context(), store.Config{URL: url})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	j, err := s.CreateJob(t.Context(), job.Job{Name: "my-job", Team: "team-a"})
	require.NoError(t, err)
	epoch, ok, err := s.TryAcquireLease(t.Context(), store.SyncLeaseName, "leader", time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	return &execDB{t: t, s: s, url: url, job: j, fence: job.Fence{Epoch: epoch}}
}

func (d *execDB) exec(q string, args ...any) {
	d.t.Helper()
	conn, err := pgx.Connect(d.t.Context(), d.url)
	require.NoError(d.t, err)
	defer conn.Close(context.WithoutCancel(d.t.Context()))
	_, err = conn.Exec(d.t.Context(), q, args...)
	require.NoError(d.t, err)
}

func (d *execDB) ids() []string {
	d.t.Helper()
	execs, err := d.s.ListJobExecutions(d.t.Context(), "team-a", "my-job", nil)
	require.NoError(d.t, err)
	var out []string
	for _, e := range execs {
		out = append(out, e.ID+":"+e.Status)
	}
	return out
}

func (d *execDB) record(u job.ExecutionUpdate, fence job.Fence) bool {
	d.t.Helper()
	if u.JobName == "" {
		u.JobName, u.JobUID, u.Type, u.OpID = "my-job", d.job.UID, job.ExecScheduled, u.ID
	}
	wrote, err := d.s.RecordExecutions(d.t.Context(), fence, []job.ExecutionUpdate{u})
	require.NoError(d.t, err)
	return wrote[0]
}

func TestRecordExecutionWritesEachTransitionOnceAndNeverChangesAFinalStatus(t *testing.T) {
	t.Parallel()
	d := newExecDB(t)
	start, end := time.Now().Add(-time.Minute).UTC().Truncate(time.Second), time.Now().UTC().Truncate(time.Second)

	require.True(t, d.record(job.ExecutionUpdate{ID: "my-job-1", Status: job.ExecRunning, StartTime: &start}, d.fence), "a new scheduled run is inserted")
	require.False(t, d.record(job.ExecutionUpdate{ID: "my-job-1", Status: job.ExecRunning, StartTime: &start}, d.fence), "the same status again writes nothing")
	require.True(t, d.record(job.ExecutionUpdate{
		ID: "my-job-1", Status: job.ExecUserError, Message: "exit 1", EndTime: &end,
		Log: &job.StoredLog{Logs: "boom\n"},
	}, d.fence))
	require.False(t, d.record(job.ExecutionUpdate{ID: "my-job-1", Status: job.ExecSucceeded, EndTime: &end}, d.fence), "a late event never turns user_error into succeeded")
	require.Equal(t, []string{"my-job-1:user_error"}, d.ids())

	target, logs, err := d.s.ExecutionLog(t.Context(), "team-a", "my-job", "my-job-1")
	require.NoError(t, err)
	require.Equal(t, "boom\n", logs.Logs)
	require.Equal(t, job.DefaultTargetName, target.Name, "its pod was read in the default target")
	e, err := d.s.GetJobExecution(t.Context(), "team-a", "my-job", "my-job-1")
	require.NoError(t, err)
	require.Equal(t, "scheduled", e.Type)
	require.Equal(t, "exit 1", e.Message)

	// The job row carries the last final execution.
	var status, id string
	var duration int
	conn, err := pgx.Connect(t.Context(), d.url)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(t.Context()))
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT last_execution_status, last_execution_id, last_execution_duration FROM data_job`).Scan(&status, &id, &duration))
	require.Equal(t, "user_error", status)
	require.Equal(t, "my-job-1", id)
	require.Equal(t, 60, duration)
}

func TestRecordExecutionIsFencedByLeaseAndJobIncarnation(t *testing.T) {
	t.Parallel()
	d := newExecDB(t)
	require.False(t, d.record(job.ExecutionUpdate{ID: "my-job-1", Status: job.ExecRunning}, job.Fence{Epoch: d.fence.Epoch + 1}),
		"a term that does not hold the lease writes nothing")
	require.False(t, d.record(job.ExecutionUpdate{
		ID: "my-job-2", JobName: "my-job", JobUID: "00000000-0000-0000-0000-000000000001",
		Type: job.ExecScheduled, OpID: "o", Status: job.ExecRunning,
	}, d.fence),
		"a run of another incarnation of the job is never attached to this one")
	require.Empty(t, d.ids())
}

func TestRetentionKeepsTheNewestFinishedExecutionsAndEveryActiveOne(t *testing.T) {
	t.Parallel()
	d := newExecDB(t)
	d.exec(`INSERT INTO data_job_execution (id, job_name, type, status, op_id, start_time, end_time) VALUES
		('my-job-1', 'my-job', 'scheduled', 'succeeded', 'o', now() - interval '30 days', now() - interval '30 days'),
		('my-job-2', 'my-job', 'scheduled', 'succeeded', 'o', now() - interval '5 hours', now() - interval '5 hours'),
		('my-job-3', 'my-job', 'scheduled', 'user_error', 'o', now() - interval '4 hours', now() - interval '4 hours'),
		('my-job-4', 'my-job', 'scheduled', 'succeeded', 'o', now() - interval '3 hours', now() - interval '3 hours'),
		('my-job-5', 'my-job', 'scheduled', 'succeeded', 'o', now() - interval '2 hours', now() - interval '2 hours'),
		('my-job-6', 'my-job', 'manual', 'running', 'o', now() - interval '40 days', NULL),
		('my-job-7', 'my-job', 'manual', 'submitted', 'o', now() - interval '40 days', NULL)`)

	n, err := d.s.DeleteExpiredExecutions(t.Context(), job.Fence{Epoch: d.fence.Epoch + 1}, job.Retention{KeptPerJob: 1, MaxAge: time.Hour, Batch: 10})
	require.NoError(t, err)
	require.Zero(t, n, "a deposed leader cleans nothing")

	n, err = d.s.DeleteExpiredExecutions(t.Context(), d.fence, job.Retention{KeptPerJob: 3, MaxAge: 14 * 24 * time.Hour, Batch: 1})
	require.NoError(t, err)
	require.Equal(t, 2, n, "by count (3 kept), one row per statement")
	require.ElementsMatch(t, []string{"my-job-3:user_error", "my-job-4:succeeded", "my-job-5:succeeded", "my-job-6:running", "my-job-7:submitted"}, d.ids())

	n, err = d.s.DeleteExpiredExecutions(t.Context(), d.fence, job.Retention{KeptPerJob: 100, MaxAge: 150 * time.Minute, Batch: 500})
	require.NoError(t, err)
	require.Equal(t, 2, n, "by age")
	require.ElementsMatch(t, []string{"my-job-5:succeeded", "my-job-6:running", "my-job-7:submitted"}, d.ids())
}

func TestRecordExecutionsWritesABatchInOneStatementAndTheLogLater(t *testing.T) {
	t.Parallel()
	d := newExecDB(t)
	other, err := d.s.CreateJob(t.Context(), job.Job{Name: "other-job", Team: "team-a"})
	require.NoError(t, err)
	at := func(m int) *time.Time {
		v := time.Now().Add(time.Duration(m) * time.Minute).UTC().Truncate(time.Second)
		return &v
	}
	mine := func(id string, st job.ExecutionStatus, end *time.Time) job.ExecutionUpdate {
		return job.ExecutionUpdate{ID: id, JobName: "my-job", JobUID: d.job.UID, Type: job.ExecScheduled, OpID: id, Status: st, StartTime: at(-10), EndTime: end}
	}
	wrote, err := d.s.RecordExecutions(t.Context(), d.fence, []job.ExecutionUpdate{
		mine("my-job-1", job.ExecSucceeded, at(-3)),
		mine("my-job-2", job.ExecUserError, at(-2)),
		mine("my-job-3", job.ExecRunning, nil),
		{ID: "other-job-1", JobName: "other-job", JobUID: "00000000-0000-0000-0000-000000000001", Type: job.ExecScheduled, OpID: "o", Status: job.ExecRunning},
		{ID: "other-job-2", JobName: "other-job", JobUID: other.UID, Type: job.ExecScheduled, OpID: "o", Status: job.ExecSucceeded, StartTime: at(-5), EndTime: at(-1)},
	})
	require.NoError(t, err)
	require.Equal(t, []bool{true, true, true, false, true}, wrote, "all but the run of another incarnation")
	require.ElementsMatch(t, []string{"my-job-1:succeeded", "my-job-2:user_error", "my-job-3:running"}, d.ids())

	conn, err := pgx.Connect(t.Context(), d.url)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(t.Context()))
	last := func(name string) (status, id string) {
		require.NoError(t, conn.QueryRow(t.Context(), `SELECT last_execution_status, last_execution_id FROM data_job WHERE name = $1`, name).Scan(&status, &id))
		return status, id
	}
	s, id := last("my-job")
	require.Equal(t, []string{"user_error", "my-job-2"}, []string{s, id}, "the job row has the one that ended last")
	s, id = last("other-job")
	require.Equal(t, []string{"succeeded", "other-job-2"}, []string{s, id})

	// The log follows the final status; it is kept once, and only for a final execution.
	missing, err := d.s.FinalWithoutLog(t.Context(), []string{"my-job-1", "my-job-2", "my-job-3"})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"my-job-1", "my-job-2"}, missing)
	ok, err := d.s.StoreExecutionLog(t.Context(), d.fence, "my-job-2", job.StoredLog{Logs: "boom\n"})
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = d.s.StoreExecutionLog(t.Context(), d.fence, "my-job-2", job.StoredLog{Logs: "again\n"})
	require.NoError(t, err)
	require.False(t, ok, "kept once")
	ok, err = d.s.StoreExecutionLog(t.Context(), d.fence, "my-job-3", job.StoredLog{Logs: "early\n"})
	require.NoError(t, err)
	require.False(t, ok, "not while it runs")
	ok, err = d.s.StoreExecutionLog(t.Context(), job.Fence{Epoch: d.fence.Epoch + 1}, "my-job-1", job.StoredLog{Logs: "x\n"})
	require.NoError(t, err)
	require.False(t, ok, "a deposed leader stores nothing")
	_, logs, err := d.s.ExecutionLog(t.Context(), "team-a", "my-job", "my-job-2")
	require.NoError(t, err)
	require.Equal(t, "boom\n", logs.Logs)
}

// A manual run that took under a second ended before it started: its start was kept to
// the microsecond (the API's clock) and its end to the second (Kubernetes' completion
// time), so its duration was negative and the console showed none. Both are whole seconds.
func TestAnExecutionsStartAndEndHaveTheSamePrecisionSoARunNeverEndsBeforeItStarts(t *testing.T) {
	t.Parallel()
	d := newExecDB(t)
	start := time.Now().UTC().Truncate(time.Second).Add(700 * time.Millisecond) // the request, at .7 s
	e, err := d.s.StartExecution(t.Context(), "team-a", "my-job", func(job.JobState) (job.NewExecution, error) {
		return job.NewExecution{ID: "my-job-manual", OpID: "op", StartedBy: "alice", Start: start}, nil
	})
	require.NoError(t, err)
	// The Job completed 0.5 s later; Kubernetes says so in whole seconds, cut down.
	end := start.Add(500 * time.Millisecond).Truncate(time.Second)
	require.True(t, d.record(job.ExecutionUpdate{ID: e.ID, Status: job.ExecSucceeded, StartTime: &start, EndTime: &end}, d.fence))

	got, err := d.s.GetJobExecution(t.Context(), "team-a", "my-job", e.ID)
	require.NoError(t, err)
	require.NotNil(t, got.StartTime)
	require.NotNil(t, got.EndTime)
	require.False(t, got.EndTime.Before(*got.StartTime), "end %s before start %s", got.EndTime, got.StartTime)
	require.Equal(t, start.Truncate(time.Second), got.StartTime.UTC(), "the start, in whole seconds")
	require.Equal(t, end, got.EndTime.UTC())
}

// A Job deleted by hand the moment it finished took its pod's log before the leader read
// it, and the API answered an empty log. The final status now marks the log pending in
// its own statement; the kept log replaces it once, and a pending one is still missing.
func TestAFinalStatusMarksItsLogPendingUntilTheLeaderKeepsIt(t *testing.T) {
	t.Parallel()
	d := newExecDB(t)
	end := time.Now().UTC().Truncate(time.Second)
	require.True(t, d.record(job.ExecutionUpdate{ID: "my-job-1", Status: job.ExecSucceeded, EndTime: &end, Log: &job.StoredLog{Pending: true}}, d.fence))

	_, logs, err := d.s.ExecutionLog(t.Context(), "team-a", "my-job", "my-job-1")
	require.NoError(t, err)
	require.Equal(t, &job.StoredLog{Pending: true}, logs, "pending, not an empty log")
	missing, err := d.s.FinalWithoutLog(t.Context(), []string{"my-job-1"})
	require.NoError(t, err)
	require.Equal(t, []string{"my-job-1"}, missing, "a pending log is still to be kept")

	ok, err := d.s.StoreExecutionLog(t.Context(), d.fence, "my-job-1", job.StoredLog{Logs: "done\n", Truncated: true})
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = d.s.StoreExecutionLog(t.Context(), d.fence, "my-job-1", job.StoredLog{Logs: "again\n"})
	require.NoError(t, err)
	require.False(t, ok, "kept once")
	_, logs, err = d.s.ExecutionLog(t.Context(), "team-a", "my-job", "my-job-1")
	require.NoError(t, err)
	require.Equal(t, &job.StoredLog{Logs: "done\n", Truncated: true}, logs)
	missing, err = d.s.FinalWithoutLog(t.Context(), []string{"my-job-1"})
	require.NoError(t, err)
	require.Empty(t, missing)
}
