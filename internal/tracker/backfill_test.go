package tracker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/maintenance"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/tracker"
)

// backfillJob is a held job (pods never scheduled: each run ends when the test says)
// whose deployment fires at 09:00 in New York, with its CronJob applied (disabled: no
// misses are accounted for).
func (f *execFixture) backfillJob(name string) {
	f.t.Helper()
	f.heldJob(name)
	f.patch(name, job.DeploymentChange{Schedule: ptr("0 9 * * *"), Policy: job.PolicyChange{TimeZone: ptr("America/New_York")}})
	f.exec(fmt.Sprintf(`INSERT INTO actual_data_job_deployment (data_job_name, job_uid, generation, team,
		deployment_version_sha, git_commit_sha, vdk_version, python_version, schedule, enabled, last_deployed_by, last_deployed_date,
		resources_cpu_request_millis, resources_cpu_limit_millis, resources_memory_request_bytes, resources_memory_limit_bytes)
	SELECT j.name, j.uid, j.generation, j.team, 'h', 'v1', '', '3.11', '0 9 * * *', false, 'alice', now(), 1000, 2000, 524288000, 1048576000
	FROM data_job j WHERE j.name = '%s'`, name))
}

// backfillRun is a run of a backfill as the database has it.
type backfillRun struct {
	id, status, logical string
}

// backfillRuns reads the runs of backfill id, by logical time.
func (f *execFixture) backfillRuns(id int64) []backfillRun {
	f.t.Helper()
	conn, err := pgx.Connect(f.t.Context(), f.dbURL)
	require.NoError(f.t, err)
	defer conn.Close(context.WithoutCancel(f.t.Context()))
	rows, _ := conn.Query(f.t.Context(), `SELECT id, status, to_char(logical_time AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
FROM data_job_execution WHERE backfill_id = $1 ORDER BY logical_time`, id)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (backfillRun, error) {
		var b backfillRun
		return b, r.Scan(&b.id, &b.status, &b.logical)
	})
	require.NoError(f.t, err)
	return out
}

func active(runs []backfillRun) []backfillRun {
	return slices.DeleteFunc(slices.Clone(runs), func(r backfillRun) bool { return job.ExecutionStatus(r.status).Final() })
}

// waitRuns waits until backfill id has started runs runs and active of them are under way,
// and requires that never more than max are under way while it waits.
func (f *execFixture) waitRuns(id int64, runs, underWay, maxParallel int) []backfillRun {
	f.t.Helper()
	var got []backfillRun
	require.Eventually(f.t, func() bool {
		got = f.backfillRuns(id)
		require.LessOrEqual(f.t, len(active(got)), maxParallel, "more runs under way than max_parallel: %v", got)
		return len(got) == runs && len(active(got)) == underWay
	}, 60*time.Second, 20*time.Millisecond, "backfill %d: want %d runs, %d under way", id, runs, underWay)
	return got
}

// succeed makes the pod of run id succeed and waits for its status.
func (f *execFixture) succeed(name, id string) {
	f.t.Helper()
	f.kubelet(f.pod(id), corev1.PodSucceeded, exited(0, "Completed", ""), "")
	f.status(name, id, job.ExecSucceeded)
}

// A backfill of 5 schedule times starts exactly 5 runs, each once, with its logical time
// as an argument and in the environment, at most max_parallel (2) at once, the next as an
// earlier one ends, and goes on across a change of leader (its state is in the database).
// Guards: a backfill that starts every run at once floods the cluster; one that loses
// track on failover runs a day twice or never.
func TestABackfillRunsEachScheduleTimeOnceAtMostMaxParallelAtOnceAcrossALeaderChange(t *testing.T) {
	f := newExecFixture(t)
	const name = "backfill-job"
	f.backfillJob(name)
	f.startExecutions()
	b, err := f.svc.CreateBackfill(t.Context(), team, name, service.BackfillRequest{
		From: "2026-01-10T14:00:00Z", To: "2026-01-14T23:00:00Z", MaxParallel: 2, Args: json.RawMessage(`{"region":"eu"}`),
	}, "alice")
	require.NoError(t, err)
	want := []string{"2026-01-10T14:00:00Z", "2026-01-11T14:00:00Z", "2026-01-12T14:00:00Z", "2026-01-13T14:00:00Z", "2026-01-14T14:00:00Z"}

	// Each run's Job, looked at while it is held (the CronJob's history limit deletes a
	// finished one): its logical time in the environment.
	envChecked := map[string]bool{}
	checkEnv := func(runs []backfillRun) {
		for _, r := range runs {
			if !envChecked[r.id] && !job.ExecutionStatus(r.status).Final() {
				c := f.job(r.id).Spec.Template.Spec.Containers[0]
				require.Contains(t, c.Env, corev1.EnvVar{Name: kube.EnvLogicalTime, Value: r.logical}, "its logical time in the environment")
				envChecked[r.id] = true
			}
		}
	}
	f.waitRuns(b.ID, 2, 2, 2)
	time.Sleep(time.Second) // the leader has had passes to over-start; waitRuns checks it did not
	runs := f.waitRuns(b.ID, 2, 2, 2)
	checkEnv(runs)
	f.succeed(name, runs[0].id)
	runs = f.waitRuns(b.ID, 3, 2, 2)
	checkEnv(runs)

	// A change of leader: a run ends while none watches; the next term records it and
	// starts the next time, once.
	f.stopExecutions()
	f.kubelet(f.pod(runs[1].id), corev1.PodSucceeded, exited(0, "Completed", ""), "")
	_, _, err = f.db.AdvanceBackfill(t.Context(), job.Fence{Epoch: f.epoch + 1000}, b.ID, time.Now())
	require.Error(t, err, "a term that does not hold the lease starts nothing")
	require.Len(t, f.backfillRuns(b.ID), 3)
	f.startExecutions()
	runs = f.waitRuns(b.ID, 4, 2, 2)
	checkEnv(runs)
	f.succeed(name, runs[2].id)
	runs = f.waitRuns(b.ID, 5, 2, 2)
	checkEnv(runs)
	f.succeed(name, runs[3].id)
	f.succeed(name, runs[4].id)

	runs = f.waitRuns(b.ID, 5, 0, 2)
	var logical []string
	for _, r := range runs {
		logical = append(logical, r.logical)
		require.Equal(t, string(job.ExecSucceeded), r.status)
		e := f.execution(name, r.id)
		require.JSONEq(t, fmt.Sprintf(`{"region":"eu","logical_time":%q}`, r.logical), string(e.Args), "its logical time as an argument")
		require.Equal(t, b.ID, e.BackfillID)
		require.True(t, envChecked[r.id], "the Job of %s was looked at", r.id)
	}
	require.Equal(t, want, logical, "one run per schedule time of 09:00 New York, each once")
	f.eventually(func() bool {
		got, err := f.svc.Backfill(t.Context(), team, name, b.ID)
		require.NoError(t, err)
		return got.FinishedAt != nil && got.Progress == job.BackfillProgress{Total: 5, Succeeded: 5}
	}, "the backfill is finished with 5 succeeded")

	// A re-run of one of them runs its Job with the same arguments and logical time.
	again, err := f.svc.StartExecution(t.Context(), team, name, service.ExecutionRequest{RerunOf: runs[1].id}, "bob", "op-rerun")
	require.NoError(t, err)
	require.Equal(t, runs[1].id, again.RerunOf)
	c := f.job(again.ID).Spec.Template.Spec.Containers[0]
	require.Len(t, c.Args, 2)
	require.Equal(t, "--arguments", c.Args[0])
	require.JSONEq(t, fmt.Sprintf(`{"logical_time":%q,"region":"eu"}`, runs[1].logical), c.Args[1], "the same arguments")
	require.Contains(t, c.Env, corev1.EnvVar{Name: kube.EnvLogicalTime, Value: runs[1].logical})
}

// A cancel stops the rest: the runs under way are cancelled as a delete cancels them (their
// Jobs deleted), the times not started never start, and the backfill finishes with every
// time counted as cancelled.
func TestCancellingABackfillCancelsItsRunsUnderWayAndStartsNoMore(t *testing.T) {
	f := newExecFixture(t)
	const name = "backfill-cancel"
	f.backfillJob(name)
	f.startExecutions()
	b, err := f.svc.CreateBackfill(t.Context(), team, name, service.BackfillRequest{
		From: "2026-01-10T00:00:00Z", To: "2026-01-14T23:00:00Z", MaxParallel: 2,
	}, "alice")
	require.NoError(t, err)
	runs := f.waitRuns(b.ID, 2, 2, 2)
	for _, r := range runs {
		f.job(r.id)
	}
	got, err := f.svc.CancelBackfill(t.Context(), team, name, b.ID, "bob")
	require.NoError(t, err)
	require.Equal(t, "bob", got.CancelledBy)
	for _, r := range runs {
		f.cancelledBy(team, name, r.id, store.MsgBackfillCancelled)
	}
	f.eventually(func() bool {
		got, err = f.svc.Backfill(t.Context(), team, name, b.ID)
		require.NoError(t, err)
		return got.FinishedAt != nil
	}, "the cancelled backfill finishes once its runs are gone")
	require.Equal(t, job.BackfillProgress{Total: 5, Cancelled: 5}, got.Progress)
	time.Sleep(time.Second) // passes that must start nothing
	require.Len(t, f.backfillRuns(b.ID), 2, "no run started after the cancel")
	_, err = f.svc.CancelBackfill(t.Context(), team, name, b.ID, "bob")
	require.NoError(t, err, "cancelling a cancelled backfill again is the same request")
}

// On main the leader's retention deleted a finished backfill's runs but never the
// backfill: every job's list of backfills grew forever. Now a backfill finished longer
// ago than the executions' max age (14 days by default) is deleted by the same cleanup,
// and the API answers it as not found.
func TestAFinishedBackfillGoesWithTheExecutionsRetention(t *testing.T) {
	f := newExecFixture(t)
	const name = "backfill-expires"
	f.backfillJob(name)
	f.startExecutions()
	b, err := f.svc.CreateBackfill(t.Context(), team, name, service.BackfillRequest{
		From: "2026-01-10T00:00:00Z", To: "2026-01-11T23:00:00Z", MaxParallel: 1,
	}, "alice")
	require.NoError(t, err)
	_, err = f.svc.CancelBackfill(t.Context(), team, name, b.ID, "bob")
	require.NoError(t, err)
	f.eventually(func() bool {
		got, err := f.svc.Backfill(t.Context(), team, name, b.ID)
		require.NoError(t, err)
		return got.FinishedAt != nil
	}, "the cancelled backfill finishes")
	f.stopExecutions()
	f.exec(fmt.Sprintf(`UPDATE data_job_backfill SET finished_at = now() - interval '15 days' WHERE id = %d`, b.ID))

	f.startStages(tracker.Config{}, maintenance.RetentionConfig{Settings: maintenance.Settings{Interval: 100 * time.Millisecond}})
	f.eventually(func() bool {
		_, err := f.svc.Backfill(t.Context(), team, name, b.ID)
		return job.KindOf(err) == job.KindNotFound
	}, "the expired backfill is deleted")
	bs, err := f.svc.Backfills(t.Context(), team, name)
	require.NoError(t, err)
	require.Empty(t, bs)
}
