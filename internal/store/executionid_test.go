package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
)

// A start takes the id it wants when free, else the first free second after it: ids
// <job>-<unix seconds> already taken (here by scheduled runs of those seconds) are passed
// over. The id is chosen in the insert's one statement; a start that tried one id per
// round trip, under its job's row lock, made k of them for the k-th start of a job in a
// second, and a hundred pipeline runs at once waited seconds for their nodes (bench/pipelines).
func TestAStartTakesTheFirstFreeIdFromTheOneItWants(t *testing.T) {
	t.Parallel()
	d := newExecDB(t)
	at := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
	start := func(id string) string {
		t.Helper()
		e, err := d.s.StartExecution(t.Context(), "team-a", "my-job", func(job.JobState) (job.NewExecution, error) {
			return job.NewExecution{ID: id, OpID: "op", StartedBy: "alice", Start: at}, nil
		})
		require.NoError(t, err)
		// Ended, so that the next start is not refused as a concurrent run.
		d.exec(`UPDATE data_job_execution SET status = 'succeeded', end_time = start_time WHERE id = $1`, e.ID)
		return e.ID
	}
	second := func(i int64) string { return fmt.Sprintf("my-job-%d", at.Unix()+i) }
	require.Equal(t, "my-job-wanted", start("my-job-wanted"), "the wanted id, free")
	require.Equal(t, second(0), start(second(0)))
	for i := int64(1); i <= 3; i++ {
		d.exec(`INSERT INTO data_job_execution (id, job_name, job_uid, type, status, op_id, start_time, end_time)
VALUES ($1, 'my-job', $2::uuid, 'scheduled', 'succeeded', 'cron', now(), now())`, second(i), d.job.UID)
	}
	require.Equal(t, second(4), start(second(0)), "seconds 0 to 3 taken")
	require.Equal(t, second(5), start("my-job-wanted"), "the wanted id taken: the first free second after the start")
	require.Equal(t, second(6), start(""), "no wanted id: the start's second on")
}

// A job started faster than once a second for long is not refused once the 1,000 seconds
// from its start's are all taken (at 10 starts a second, after 111 s: `no free id`, and a
// trigger's whole firing with it): the start takes the id after the job's highest
// <job>-<n>, still VDK's form.
func TestAStartWhoseThousandSecondsAreTakenTakesTheIdAfterTheJobsHighest(t *testing.T) {
	t.Parallel()
	d := newExecDB(t)
	at := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
	second := func(i int64) string { return fmt.Sprintf("my-job-%d", at.Unix()+i) }
	start := func() string {
		t.Helper()
		e, err := d.s.StartExecution(t.Context(), "team-a", "my-job", func(job.JobState) (job.NewExecution, error) {
			return job.NewExecution{OpID: "op", StartedBy: "alice", Start: at}, nil
		})
		require.NoError(t, err)
		d.exec(`UPDATE data_job_execution SET status = 'succeeded', end_time = start_time WHERE id = $1`, e.ID)
		return e.ID
	}
	d.exec(`INSERT INTO data_job_execution (id, job_name, job_uid, type, status, op_id, start_time, end_time)
SELECT 'my-job-' || ($1::bigint + i), 'my-job', $2::uuid, 'manual', 'succeeded', 'op', now(), now() FROM generate_series(0, 999) i`,
		at.Unix(), d.job.UID)
	require.Equal(t, second(1000), start(), "the window taken: the id after the highest")
	d.exec(`INSERT INTO data_job_execution (id, job_name, job_uid, type, status, op_id, start_time, end_time)
VALUES ($1, 'my-job', $2::uuid, 'manual', 'succeeded', 'op', now(), now())`, second(5000), d.job.UID)
	require.Equal(t, second(5001), start(), "after the highest, not the first gap")
	d.exec(`DELETE FROM data_job_execution WHERE id = $1`, second(10))
	require.Equal(t, second(10), start(), "a free second in the window is taken first, as before")
}
