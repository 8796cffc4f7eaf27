package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/store"
)

// Retention never deletes the runs of an open backfill, and a finished backfill's progress
// still adds up once retention deleted its runs: it was counted when the backfill finished.
// A step of a term that lost the lease writes nothing. (Guard: a backfill of 1,000 runs
// against 100 kept per job reported runs that vanished.)
func TestABackfillsProgressSurvivesRetentionAndItsStepsAreFenced(t *testing.T) {
	t.Parallel()
	d := newExecDB(t)
	conn, err := pgx.Connect(t.Context(), d.url)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(t.Context()))
	var id int64
	require.NoError(t, conn.QueryRow(t.Context(), `INSERT INTO data_job_backfill (job_name, job_uid, team, from_time, to_time, max_parallel, times, next_index, created_by)
VALUES ('my-job', $1::uuid, 'team-a', now(), now(), 1, ARRAY[now() - interval '2 days', now() - interval '1 day'], 1, 'alice') RETURNING id`, d.job.UID).Scan(&id))
	d.exec(`INSERT INTO data_job_execution (id, job_name, job_uid, type, status, op_id, start_time, end_time, backfill_id) VALUES
		('my-job-1', 'my-job', $1::uuid, 'manual', 'succeeded', 'o', now() - interval '30 days', now() - interval '30 days', $2),
		('my-job-2', 'my-job', $1::uuid, 'manual', 'succeeded', 'o', now() - interval '30 days', now() - interval '30 days', NULL)`, d.job.UID, id)
	retention := job.Retention{KeptPerJob: 100, MaxAge: time.Hour, Batch: 10}

	n, err := d.s.DeleteExpiredExecutions(t.Context(), d.fence, retention)
	require.NoError(t, err)
	require.Equal(t, 1, n, "only the run of no backfill")
	require.Equal(t, []string{"my-job-1:succeeded"}, d.ids())

	_, _, err = d.s.AdvanceBackfill(t.Context(), job.Fence{Epoch: d.fence.Epoch + 1}, id, time.Now())
	require.Error(t, err, "a deposed leader takes no step")
	b, err := d.s.Backfill(t.Context(), "team-a", "my-job", id)
	require.NoError(t, err)
	require.Nil(t, b.FinishedAt)

	// The job has no deployment: the step stops the backfill and, nothing under way, finishes it.
	started, finished, err := d.s.AdvanceBackfill(t.Context(), d.fence, id, time.Now())
	require.NoError(t, err)
	require.Empty(t, started)
	require.True(t, finished)
	n, err = d.s.DeleteExpiredExecutions(t.Context(), d.fence, retention)
	require.NoError(t, err)
	require.Equal(t, 1, n, "a finished backfill's runs expire like any")

	b, err = d.s.Backfill(t.Context(), "team-a", "my-job", id)
	require.NoError(t, err)
	require.NotNil(t, b.FinishedAt)
	require.Equal(t, "datajobs", b.CancelledBy)
	require.Equal(t, store.MsgDeploymentDeleted, b.Message)
	require.Equal(t, job.BackfillProgress{Total: 2, Succeeded: 1, Cancelled: 1}, b.Progress, "counted when it finished")
}

// On main a finished backfill's row was never deleted: retention deleted its runs, but
// the backfills of every job (deleted ones too) piled up forever. Now they follow the
// executions' retention: the newest KeptPerJob finished ones per job incarnation, none
// finished longer than MaxAge ago; an open one never; a deposed leader deletes nothing.
// The API's list (GET .../backfills) shows what is left, and a run of a deleted backfill
// keeps its logical time.
func TestFinishedBackfillsFollowTheExecutionsRetention(t *testing.T) {
	t.Parallel()
	d := newExecDB(t)
	conn, err := pgx.Connect(t.Context(), d.url)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(t.Context()))
	backfill := func(finishedAgo string) int64 {
		var id int64
		require.NoError(t, conn.QueryRow(t.Context(), `INSERT INTO data_job_backfill (job_name, job_uid, team, from_time, to_time, max_parallel, times, next_index, created_by, finished_at)
VALUES ('my-job', $1::uuid, 'team-a', now(), now(), 1, ARRAY[now()], 1, 'alice', CASE WHEN $2 = '' THEN NULL ELSE now() - $2::interval END) RETURNING id`,
			d.job.UID, finishedAgo).Scan(&id))
		return id
	}
	old := backfill("20 days")
	d.exec(`INSERT INTO data_job_execution (id, job_name, job_uid, type, status, op_id, start_time, end_time, backfill_id, logical_time) VALUES
		('my-job-1', 'my-job', $1::uuid, 'manual', 'succeeded', 'o', now() - interval '1 hour', now() - interval '1 hour', $2, '2026-01-01T09:00:00Z')`, d.job.UID, old)
	older, newer, newest := backfill("3 hours"), backfill("2 hours"), backfill("1 hour")
	open := backfill("")
	listed := func() []int64 {
		bs, err := d.s.Backfills(t.Context(), "team-a", "my-job")
		require.NoError(t, err)
		var ids []int64
		for _, b := range bs {
			ids = append(ids, b.ID)
		}
		return ids
	}
	retention := job.Retention{KeptPerJob: 2, MaxAge: 14 * 24 * time.Hour, Batch: 1}

	n, err := d.s.DeleteExpiredBackfills(t.Context(), job.Fence{Epoch: d.fence.Epoch + 1}, retention)
	require.NoError(t, err)
	require.Zero(t, n, "a deposed leader deletes nothing")
	require.Equal(t, []int64{open, newest, newer, older, old}, listed())

	n, err = d.s.DeleteExpiredBackfills(t.Context(), d.fence, retention)
	require.NoError(t, err)
	require.Equal(t, 2, n, "the one finished 20 days ago (past MaxAge) and the third newest (past KeptPerJob), a row per statement")
	require.Equal(t, []int64{open, newest, newer}, listed(), "the open one stays whatever its age")

	var logical time.Time
	var of *int64
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT logical_time, backfill_id FROM data_job_execution WHERE id = 'my-job-1'`).Scan(&logical, &of))
	require.Nil(t, of, "the run stays, without its deleted backfill")
	require.Equal(t, time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC), logical.UTC())
}
