package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	pl "github.com/datajobs/datajobs/internal/pipeline"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testenv"
)

// pipeWorld is a store with deployed, applied jobs and the lease held.
type pipeWorld struct {
	t     *testing.T
	st    *store.Store
	url   string
	fence job.Fence
}

func newPipeWorld(t *testing.T, jobs map[string]string) *pipeWorld {
	t.Helper()
	url := testenv.DatabaseURL(t)
	st, err := store.Open(t.Context(), store.Config{URL: url})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	epoch, ok, err := st.TryAcquireLease(t.Context(), store.SyncLeaseName, "test", time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	w := &pipeWorld{t: t, st: st, url: url, fence: job.Fence{Epoch: epoch}}
	for name, team := range jobs {
		w.deployed(team, name)
	}
	return w
}

// deployed creates name in team, deploys it and records it applied.
func (w *pipeWorld) deployed(team, name string) {
	testenv.DeployApplied(w.t, w.st, w.fence, team, name)
}

func (w *pipeWorld) count(q string, args ...any) int {
	w.t.Helper()
	conn, err := pgx.Connect(w.t.Context(), w.url)
	require.NoError(w.t, err)
	defer conn.Close(context.WithoutCancel(w.t.Context()))
	var n int
	require.NoError(w.t, conn.QueryRow(w.t.Context(), q, args...).Scan(&n))
	return n
}

// finish records the execution id of job name final with status, as the tracker does.
func (w *pipeWorld) finish(name, id string, status job.ExecutionStatus) {
	w.t.Helper()
	s, err := w.st.LoadSyncState(w.t.Context(), name)
	require.NoError(w.t, err)
	end := time.Now().UTC().Truncate(time.Second)
	wrote, err := w.st.RecordExecutions(w.t.Context(), w.fence, []job.ExecutionUpdate{{ID: id, JobName: name, JobUID: s.Job.UID, Type: job.ExecManual, OpID: id, Status: status, EndTime: &end}})
	require.NoError(w.t, err)
	require.True(w.t, wrote[0])
}

func (w *pipeWorld) step(id int64) store.PipelineStep {
	w.t.Helper()
	s, err := w.st.StepPipelineRun(w.t.Context(), w.fence, id, time.Now())
	require.NoError(w.t, err)
	return s
}

func (w *pipeWorld) statuses(team, name string, id int64) map[string]pl.NodeStatus {
	w.t.Helper()
	r, err := w.st.GetPipelineRun(w.t.Context(), team, name, id)
	require.NoError(w.t, err)
	out := map[string]pl.NodeStatus{"run": pl.NodeStatus(r.Status)}
	for _, n := range r.Nodes {
		out[n.Name] = n.Status
	}
	return out
}

const diamondBody = `{"nodes":[
	{"name":"extract","job_name":"extract-job"},
	{"name":"left-b","job_name":"left-job","depends_on":["extract"],"arguments":{"side":"left"}},
	{"name":"right-c","job_name":"right-job","team":"team-b","depends_on":["extract"]},
	{"name":"join-d","job_name":"join-job","depends_on":["left-b","right-c"]}]}`

// A pipeline is stored only with jobs that exist and, of another team, are granted; a job
// it runs cannot be deleted; a run starts each node once per step under the lease, and a
// failed root makes the rest upstream_failed without an execution; repair starts what
// failed and its downstream, in the same run.
func TestAPipelineRunStepsUnderTheLeaseAndStartsEachNodeOnce(t *testing.T) {
	t.Parallel()
	w := newPipeWorld(t, map[string]string{"extract-job": "team-a", "left-job": "team-a", "right-job": "team-b", "join-job": "team-a"})
	ctx := t.Context()
	spec, err := pl.Parse("team-a", "diamond", []byte(diamondBody))
	require.NoError(t, err)

	_, err = w.st.PutPipeline(ctx, "team-a", "diamond", spec, "alice", "op")
	require.Equal(t, job.KindForbidden, job.KindOf(err), "team-b's job is not granted")
	require.Contains(t, err.Error(), "right-job")
	bad, err := pl.Parse("team-a", "diamond", []byte(`{"nodes":[{"name":"extract","job_name":"no-such-job"}]}`))
	require.NoError(t, err)
	_, err = w.st.PutPipeline(ctx, "team-a", "diamond", bad, "alice", "op")
	require.Equal(t, job.KindInvalid, job.KindOf(err))
	require.Contains(t, err.Error(), `"no-such-job" of team "team-a" in node "extract"`)
	require.Zero(t, w.count(`SELECT count(*) FROM pipeline`), "nothing stored")

	require.NoError(t, w.st.GrantJob(ctx, "team-b", "right-job", "team-a", "bob"))
	created, err := w.st.PutPipeline(ctx, "team-a", "diamond", spec, "alice", "op-1")
	require.NoError(t, err)
	require.True(t, created)
	created, err = w.st.PutPipeline(ctx, "team-a", "diamond", spec, "alice", "op-2")
	require.NoError(t, err)
	require.False(t, created)
	p, err := w.st.GetPipeline(ctx, "team-a", "diamond")
	require.NoError(t, err)
	require.Equal(t, 2, p.Revision)
	require.Equal(t, 2, w.count(`SELECT count(*) FROM pipeline_revision`))

	err = w.st.DeleteJob(ctx, "team-a", "left-job")
	require.Equal(t, job.KindConflict, job.KindOf(err))
	require.Contains(t, err.Error(), `"diamond"`)

	id, err := w.st.StartPipelineRun(ctx, "team-a", "diamond", pl.NewRun{LogicalTime: time.Now(), StartedBy: "alice", Arguments: []byte(`{"run":"x"}`)})
	require.NoError(t, err)
	_, err = w.st.StartPipelineRun(ctx, "team-a", "diamond", pl.NewRun{LogicalTime: time.Now(), StartedBy: "alice"})
	require.Equal(t, job.KindConflict, job.KindOf(err), "max_active_runs is 1")

	_, err = w.st.StepPipelineRun(ctx, job.Fence{Epoch: w.fence.Epoch + 1}, id, time.Now())
	require.Error(t, err, "a deposed leader takes no step")
	s := w.step(id)
	require.Len(t, s.Started, 1)
	require.Empty(t, w.step(id).Started, "a second step starts nothing again")
	e, err := w.st.GetJobExecution(ctx, "team-a", "extract-job", s.Started[0])
	require.NoError(t, err)
	require.Equal(t, pl.StartedBy("team-a", "diamond", id), e.StartedBy)
	require.Equal(t, job.ExecManual, e.Type)
	require.JSONEq(t, `{"run":"x","logical_time":"`+e.LogicalTime.UTC().Format(time.RFC3339)+`"}`, string(e.Args))
	r, err := w.st.GetPipelineRun(ctx, "team-a", "diamond", id)
	require.NoError(t, err)
	require.Equal(t, "waiting for extract", r.Nodes[1].Message)

	w.finish("extract-job", s.Started[0], job.ExecUserError)
	require.Equal(t, 1, w.count(`SELECT count(*) FROM pipeline_run WHERE id = $1 AND status = 'running'`, id))
	w.step(id)
	require.Equal(t, map[string]pl.NodeStatus{"run": "failed", "extract": pl.UserError, "left-b": pl.UpstreamFailed, "right-c": pl.UpstreamFailed, "join-d": pl.UpstreamFailed},
		w.statuses("team-a", "diamond", id))
	require.Equal(t, 1, w.count(`SELECT count(*) FROM data_job_execution`), "no execution for the nodes that never ran")

	again, err := w.st.RepairPipelineRun(ctx, "team-a", "diamond", id)
	require.NoError(t, err)
	require.Equal(t, []string{"extract", "left-b", "right-c", "join-d"}, again)
	s = w.step(id)
	require.Len(t, s.Started, 1)
	w.finish("extract-job", s.Started[0], job.ExecSucceeded)
	s = w.step(id)
	require.Len(t, s.Started, 2, "both branches")
	for _, e := range s.Started {
		name := "left-job"
		if _, err := w.st.GetJobExecution(ctx, "team-b", "right-job", e); err == nil {
			name = "right-job"
		}
		w.finish(name, e, job.ExecSucceeded)
	}
	s = w.step(id)
	require.Len(t, s.Started, 1)
	w.finish("join-job", s.Started[0], job.ExecPlatformError)
	w.step(id)
	st := w.statuses("team-a", "diamond", id)
	require.Equal(t, pl.NodeStatus("failed"), st["run"])
	require.Equal(t, pl.PlatformError, st["join-d"])

	again, err = w.st.RepairPipelineRun(ctx, "team-a", "diamond", id)
	require.NoError(t, err)
	require.Equal(t, []string{"join-d"}, again, "only what failed and its downstream")
	r, err = w.st.GetPipelineRun(ctx, "team-a", "diamond", id)
	require.NoError(t, err)
	require.Equal(t, 3, r.Nodes[3].Attempt)
	require.Equal(t, 2, r.Nodes[0].Attempt)

	require.NoError(t, w.st.CancelPipelineRun(ctx, "team-a", "diamond", id))
	w.step(id)
	require.Equal(t, pl.NodeStatus("cancelled"), w.statuses("team-a", "diamond", id)["run"])

	require.NoError(t, w.st.DeletePipeline(ctx, "team-a", "diamond"))
	require.NoError(t, w.st.DeleteJob(ctx, "team-a", "left-job"), "no pipeline uses it any more")
}

// A node whose deployment is deleted while it runs is cancelled (the execution's cancel),
// and the run fails.
func TestANodeWhoseDeploymentIsDeletedWhileItRunsFailsTheRun(t *testing.T) {
	t.Parallel()
	w := newPipeWorld(t, map[string]string{"extract-job": "team-a", "left-job": "team-a"})
	ctx := t.Context()
	spec, err := pl.Parse("team-a", "two-steps", []byte(`{"nodes":[{"name":"first-step","job_name":"extract-job"},{"name":"second-step","job_name":"left-job","depends_on":["first-step"]}]}`))
	require.NoError(t, err)
	_, err = w.st.PutPipeline(ctx, "team-a", "two-steps", spec, "alice", "op")
	require.NoError(t, err)
	id, err := w.st.StartPipelineRun(ctx, "team-a", "two-steps", pl.NewRun{LogicalTime: time.Now(), StartedBy: "alice"})
	require.NoError(t, err)
	s := w.step(id)
	require.Len(t, s.Started, 1)
	require.NoError(t, w.st.DeleteDeployment(ctx, "team-a", "extract-job"))
	w.finish("extract-job", s.Started[0], job.ExecCancelled) // the tracker, once the Job is gone
	w.step(id)
	require.Equal(t, map[string]pl.NodeStatus{"run": "failed", "first-step": pl.Cancelled, "second-step": pl.UpstreamFailed}, w.statuses("team-a", "two-steps", id))
}

// A scheduled pipeline starts one run per schedule time, whichever leader tries, and none
// under a deposed one; a backfill starts its runs oldest first, at most max_parallel
// running, and finishes once all ended.
func TestScheduledRunsAndBackfillRunsStartOncePerTime(t *testing.T) {
	t.Parallel()
	w := newPipeWorld(t, map[string]string{"extract-job": "team-a"})
	ctx := t.Context()
	spec, err := pl.Parse("team-a", "nightly-etl", []byte(`{"schedule":{"schedule_cron":"* * * * *"},"nodes":[{"name":"extract","job_name":"extract-job"}],"max_active_runs":5}`))
	require.NoError(t, err)
	_, err = w.st.PutPipeline(ctx, "team-a", "nightly-etl", spec, "alice", "op")
	require.NoError(t, err)
	ps, err := w.st.ScheduledPipelines(ctx)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	at := time.Now().UTC().Truncate(time.Minute)
	_, err = w.st.FireScheduledRun(ctx, job.Fence{Epoch: w.fence.Epoch + 1}, ps[0].ID, &at, time.Now())
	require.Error(t, err, "a deposed leader fires nothing")
	run, err := w.st.FireScheduledRun(ctx, w.fence, ps[0].ID, &at, time.Now())
	require.NoError(t, err)
	require.NotZero(t, run)
	again, err := w.st.FireScheduledRun(ctx, w.fence, ps[0].ID, &at, time.Now())
	require.NoError(t, err)
	require.Zero(t, again, "one run per schedule time")
	r, err := w.st.GetPipelineRun(ctx, "team-a", "nightly-etl", run)
	require.NoError(t, err)
	require.Equal(t, "schedule", r.StartedBy)
	require.True(t, at.Equal(r.LogicalTime))
	ps, err = w.st.ScheduledPipelines(ctx)
	require.NoError(t, err)
	require.False(t, ps[0].From.Before(at), "accounted for up to now")

	var times []time.Time
	for i := range 5 {
		times = append(times, time.Date(2026, 1, 1+i, 3, 0, 0, 0, time.UTC))
	}
	b, err := w.st.CreatePipelineBackfill(ctx, "team-a", "nightly-etl", pl.NewBackfill{Times: times, MaxParallel: 2, CreatedBy: "bob"})
	require.NoError(t, err)
	var logical []time.Time
	for range 10 {
		started, err := w.st.AdvancePipelineBackfill(ctx, w.fence, b)
		require.NoError(t, err)
		require.LessOrEqual(t, w.count(`SELECT count(*) FROM pipeline_run WHERE backfill_id = $1 AND status = 'running'`, b), 2, "at most max_parallel")
		for _, id := range started {
			r, err := w.st.GetPipelineRun(ctx, "team-a", "nightly-etl", id)
			require.NoError(t, err)
			require.Equal(t, "backfill/bob", r.StartedBy)
			logical = append(logical, r.LogicalTime.UTC())
		}
		conn, err := pgx.Connect(ctx, w.url)
		require.NoError(t, err)
		_, err = conn.Exec(ctx, `UPDATE pipeline_run SET status = 'succeeded' WHERE backfill_id = $1`, b)
		require.NoError(t, err)
		require.NoError(t, conn.Close(ctx))
	}
	require.Equal(t, times, logical, "one run per time, oldest first")
	require.Equal(t, 1, w.count(`SELECT count(*) FROM pipeline_backfill WHERE id = $1 AND finished_at IS NOT NULL`, b))
}

// A pipeline enabled again accounts for its schedule from then on: the times it was
// disabled over are not missed runs for catch_up to start.
func TestAPipelineEnabledAgainDoesNotCatchUpItsDisabledTimes(t *testing.T) {
	t.Parallel()
	w := newPipeWorld(t, map[string]string{"extract-job": "team-a"})
	ctx := t.Context()
	put := func(enabled bool) {
		spec, err := pl.Parse("team-a", "hourly-etl", []byte(fmt.Sprintf(`{"enabled":%t,"schedule":{"schedule_cron":"0 * * * *","catch_up":3},"nodes":[{"name":"extract","job_name":"extract-job"}]}`, enabled)))
		require.NoError(t, err)
		_, err = w.st.PutPipeline(ctx, "team-a", "hourly-etl", spec, "alice", "op")
		require.NoError(t, err)
	}
	put(true)
	ps, err := w.st.ScheduledPipelines(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, ps[0].CatchUp)
	past := time.Now().Add(-5 * time.Hour)
	_, err = w.st.FireScheduledRun(ctx, w.fence, ps[0].ID, nil, past) // accounted up to 5 hours ago
	require.NoError(t, err)
	put(true)
	ps, err = w.st.ScheduledPipelines(ctx)
	require.NoError(t, err)
	require.WithinDuration(t, past, ps[0].From, time.Millisecond, "an enabled pipeline's PUT keeps where its schedule was accounted")
	put(false)
	put(true)
	ps, err = w.st.ScheduledPipelines(ctx)
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), ps[0].From, time.Minute, "enabled again: from now")
}
