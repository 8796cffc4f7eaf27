package store_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/store"
)

// DESIGN.md invariant 11. On main the delete cascaded to the execution rows: a running
// run vanished (404) and nothing was left to tell the leader to stop its Job.
func TestAJobDeleteRequestsTheCancelOfItsRunsWhoseRowsOutliveIt(t *testing.T) {
	t.Parallel()
	d := newExecDB(t)
	d.exec(`INSERT INTO data_job_execution (id, job_name, type, status, op_id, start_time, end_time) VALUES
		('my-job-1', 'my-job', 'manual', 'running', 'o', now(), NULL),
		('my-job-2', 'my-job', 'scheduled', 'submitted', 'o', now(), NULL),
		('my-job-3', 'my-job', 'scheduled', 'succeeded', 'o', now() - interval '1 hour', now() - interval '1 hour')`)
	listen, err := pgx.Connect(t.Context(), d.url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = listen.Close(t.Context()) })
	_, err = listen.Exec(t.Context(), "LISTEN "+store.ExecutionsChannel)
	require.NoError(t, err)

	require.NoError(t, d.s.DeleteJob(t.Context(), "team-a", "my-job"))
	heard := map[string]bool{}
	for len(heard) < 2 {
		n, err := listen.WaitForNotification(t.Context())
		require.NoError(t, err)
		heard[n.Payload] = true
	}
	require.Equal(t, map[string]bool{"my-job-1": true, "my-job-2": true}, heard, "the leader hears of each active run")
	for _, id := range []string{"my-job-1", "my-job-2"} {
		e, ok, err := d.s.LoadExecution(t.Context(), id)
		require.NoError(t, err)
		require.True(t, ok, "the row outlives its job")
		require.True(t, e.CancelRequested)
		require.Equal(t, store.MsgJobDeleted, e.CancelMessage)
	}
	done, ok, err := d.s.LoadExecution(t.Context(), "my-job-3")
	require.NoError(t, err)
	require.True(t, ok)
	require.False(t, done.CancelRequested, "a finished run is left as it is")

	// The leader ends the row of the deleted job's run, and never inserts one.
	now := time.Now()
	require.True(t, d.record(job.ExecutionUpdate{ID: "my-job-1", Status: job.ExecCancelled, Message: store.MsgJobDeleted, EndTime: &now}, d.fence),
		"cancelled is written for a job that no longer exists")
	require.False(t, d.record(job.ExecutionUpdate{ID: "my-job-9", Status: job.ExecRunning}, d.fence),
		"a run of a deleted job not recorded yet is not inserted")
	e, err := d.s.GetJobExecution(t.Context(), "team-a", "my-job", "my-job-1")
	require.NoError(t, err, "the stopped run reads by its id until retention")
	require.Equal(t, string(job.ExecCancelled), e.Status)
	require.Equal(t, store.MsgJobDeleted, e.Message)
	_, err = d.s.GetJobExecution(t.Context(), "team-b", "my-job", "my-job-1")
	require.Equal(t, job.KindNotFound, job.KindOf(err), "only its team reads it")

	// A job created again under the name sees none of the old runs, and may start.
	_, err = d.s.CreateJob(t.Context(), job.Job{Name: "my-job", Team: "team-a"})
	require.NoError(t, err)
	require.Empty(t, d.ids())
	counts, err := d.s.ExecutionCounts(t.Context(), []string{"my-job"})
	require.NoError(t, err)
	require.Empty(t, counts)

	// Retention covers the rows whose job is gone (counted apart from the new job's).
	n, err := d.s.DeleteExpiredExecutions(t.Context(), d.fence, job.Retention{KeptPerJob: 1, MaxAge: time.Hour, Batch: 10})
	require.NoError(t, err)
	require.Equal(t, 1, n, "the older finished run of the deleted job")
	_, ok, err = d.s.LoadExecution(t.Context(), "my-job-3")
	require.NoError(t, err)
	require.False(t, ok)
}
