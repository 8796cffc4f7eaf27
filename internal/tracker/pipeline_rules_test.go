package tracker_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/pipeline"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/stepper"
)

// The trigger rules one_failed and none_failed, a node waiting for its job's deployment,
// a schedule and a backfill, on kwok: each node's Job is created by the tracker from its
// job's CronJob, and the test plays the kubelet.

// putPipeline stores the pipeline name of body; the fixture's pipeline helpers read its
// runs from then on.
func (f *execFixture) putPipeline(name, body string) {
	f.t.Helper()
	_, _, err := f.svc.PutPipeline(f.t.Context(), team, name, []byte(body), "alice", "op-"+name)
	require.NoError(f.t, err)
	f.pipeline = name
}

// startRun starts a run of the fixture's pipeline.
func (f *execFixture) startRun() int64 {
	f.t.Helper()
	id, err := f.svc.StartPipelineRun(f.t.Context(), team, f.pipeline, service.RunRequest{}, "alice")
	require.NoError(f.t, err)
	return id
}

// jobArgs returns the arguments the Job of execution id was given.
func (f *execFixture) jobArgs(id string) map[string]any {
	f.t.Helper()
	f.pod(id)
	j, err := f.client.BatchV1().Jobs(f.ns).Get(f.t.Context(), id, metav1.GetOptions{})
	require.NoError(f.t, err)
	args := j.Spec.Template.Spec.Containers[0].Args
	require.Len(f.t, args, 2)
	var got map[string]any
	require.NoError(f.t, json.Unmarshal([]byte(args[1]), &got))
	return got
}

// one_failed starts the join as soon as one branch failed, while the other still runs;
// the run fails (the failed branch's on_failure is fail_pipeline) once the join ends.
func TestOneFailedStartsAsSoonAsOneUpstreamNodeFailed(t *testing.T) {
	f := newExecFixture(t)
	f.startExecutions()
	id := f.diamondPipeline(pipeline.OneFailed)
	f.startStepper(f.epoch)
	f.ended("extract-job", f.started(id, "extract"), true)
	b, c := f.started(id, "left-side"), f.started(id, "right-side")
	f.ended("left-job", b, false)
	d := f.started(id, "join-all")
	_, ns := f.nodes(id)
	require.Equal(t, pipeline.Running, ns["right-side"].Status, "the join started before the other branch ended")
	f.ended("right-job", c, true)
	f.ended("join-job", d, true)
	ns = f.runEnds(id, pipeline.RunFailed)
	require.Equal(t, pipeline.Succeeded, ns["join-all"].Status)
	require.Equal(t, pipeline.UserError, ns["left-side"].Status)
}

// An alarm node (one_failed) is skipped when its upstream succeeded, without a Job, and a
// report (none_failed) runs after it, a skipped upstream passing; in the next run the
// upstream fails (on_failure continue): the alarm runs and the report is upstream_failed,
// without a Job, which fails the run.
func TestNoneFailedPassesSkippedNodesAndStopsAtAFailedOne(t *testing.T) {
	f := newExecFixture(t)
	f.startExecutions()
	for _, n := range []string{"extract-job", "alarm-job", "report-job"} {
		f.pipelineJob(n)
	}
	f.putPipeline("guarded", `{"nodes":[
		{"name":"extract","job_name":"extract-job","on_failure":"continue"},
		{"name":"alarm-step","job_name":"alarm-job","depends_on":["extract"],"trigger_rule":"one_failed"},
		{"name":"report-step","job_name":"report-job","depends_on":["extract","alarm-step"],"trigger_rule":"none_failed"}]}`)
	f.startStepper(f.epoch)

	id := f.startRun()
	f.ended("extract-job", f.started(id, "extract"), true)
	f.ended("report-job", f.started(id, "report-step"), true)
	ns := f.runEnds(id, pipeline.RunSucceeded)
	require.Equal(t, pipeline.Skipped, ns["alarm-step"].Status)
	require.Nil(t, ns["alarm-step"].ExecutionID, "no Job for a skipped node")

	id = f.startRun()
	f.ended("extract-job", f.started(id, "extract"), false)
	f.ended("alarm-job", f.started(id, "alarm-step"), true)
	ns = f.runEnds(id, pipeline.RunFailed)
	require.Equal(t, pipeline.UserError, ns["extract"].Status)
	require.Equal(t, pipeline.UpstreamFailed, ns["report-step"].Status)
	require.Nil(t, ns["report-step"].ExecutionID)
	require.Equal(t, 1, f.count(`SELECT count(*) FROM data_job_execution WHERE job_name = 'report-job'`), "the report ran in the first run only")
}

// A node whose job is deployed but not applied yet (no CronJob, no applied record) waits,
// saying so, with no Job; once its deployment is applied it starts and the run goes on.
func TestANodeWaitsForItsJobsDeploymentToBeApplied(t *testing.T) {
	f := newExecFixture(t)
	f.startExecutions()
	j := f.createJob("late-job")
	f.deploy("late-job", job.DeploymentChange{JobVersion: ptr("v1")})
	f.putPipeline("late-one", `{"nodes":[{"name":"late-step","job_name":"late-job"}]}`)
	f.startStepper(f.epoch)
	id := f.startRun()
	f.eventually(func() bool {
		_, ns := f.nodes(id)
		return ns["late-step"].Message == `waiting for the deployment of job "late-job" to be applied`
	}, "the node says what it waits for")
	status, ns := f.nodes(id)
	require.Equal(t, pipeline.RunRunning, status)
	require.Equal(t, pipeline.Pending, ns["late-step"].Status)
	require.Nil(t, ns["late-step"].ExecutionID)
	require.Zero(t, f.jobCount())

	f.heldCronJob(j) // the synchronizer applies it
	f.recordApplied("late-job")
	f.ended("late-job", f.started(id, "late-step"), true)
	f.runEnds(id, pipeline.RunSucceeded)
}

// A pipeline scheduled every minute starts nothing before its minute and one run at it,
// whose logical_time is the minute and reaches the node's Job (the stepper's clock is the
// test's, moved across the minute).
func TestAScheduledPipelineFiresOnItsMinute(t *testing.T) {
	f := newExecFixture(t)
	f.startExecutions()
	f.pipelineJob("minute-job")
	f.putPipeline("every-minute", `{"schedule":{"schedule_cron":"* * * * *"},"nodes":[{"name":"minute-step","job_name":"minute-job"}]}`)
	minute := time.Now().UTC().Truncate(time.Minute).Add(time.Minute)
	var clock atomic.Int64
	clock.Store(minute.Add(-2 * time.Second).UnixNano())
	f.startStepperWith(stepper.Config{Settings: controller.Settings{Interval: 100 * time.Millisecond, Now: func() time.Time { return time.Unix(0, clock.Load()) }}}, f.epoch)
	time.Sleep(time.Second)
	require.Zero(t, f.count(`SELECT count(*) FROM pipeline_run`), "nothing before its minute")

	clock.Store(minute.Add(time.Second).UnixNano())
	f.eventually(func() bool { return f.count(`SELECT count(*) FROM pipeline_run`) == 1 }, "the run of the minute")
	var id int64
	var logical time.Time
	require.NoError(t, f.conn().QueryRow(t.Context(), `SELECT id, logical_time FROM pipeline_run WHERE started_by = 'schedule'`).Scan(&id, &logical))
	require.True(t, minute.Equal(logical), "logical_time %s is the minute %s", logical, minute)
	e := f.started(id, "minute-step")
	require.Equal(t, minute.Format(time.RFC3339), f.jobArgs(e)["logical_time"])
	f.ended("minute-job", e, true)
	f.runEnds(id, pipeline.RunSucceeded)
	time.Sleep(300 * time.Millisecond)
	require.Equal(t, 1, f.count(`SELECT count(*) FROM pipeline_run`), "one run per schedule time")
}

// A backfill of 5 schedule times runs 5 runs, each with its logical time, which reaches
// its node's Job; the backfill is finished once all ended.
func TestAPipelineBackfillOfFiveTimesRunsFiveRunsWithTheirLogicalTimes(t *testing.T) {
	f := newExecFixture(t)
	f.startExecutions()
	f.pipelineJob("daily-job")
	f.putPipeline("daily-load", `{"schedule":{"schedule_cron":"0 3 * * *"},"nodes":[{"name":"daily-step","job_name":"daily-job"}]}`)
	f.startStepper(f.epoch)
	_, runs, err := f.svc.CreatePipelineBackfill(t.Context(), team, "daily-load", service.PipelineBackfillRequest{
		From: "2026-01-01T00:00:00Z", To: "2026-01-05T23:00:00Z", MaxParallelRuns: 2,
	}, "bob")
	require.NoError(t, err)
	require.Equal(t, 5, runs)
	got := map[string]bool{}
	for len(got) < 5 {
		var id int64
		f.eventually(func() bool {
			err := f.conn().QueryRow(t.Context(), `SELECT r.id FROM pipeline_run r JOIN pipeline_node_run nr ON nr.run_id = r.id
JOIN data_job_execution e ON e.id = nr.execution_id WHERE e.status IN ('submitted', 'running') LIMIT 1`).Scan(&id)
			return err == nil
		}, fmt.Sprintf("run %d of the backfill started", len(got)+1))
		e := f.started(id, "daily-step")
		r, err := f.svc.GetPipelineRun(t.Context(), team, "daily-load", id)
		require.NoError(t, err)
		lt := r.LogicalTime.UTC().Format(time.RFC3339)
		require.Equal(t, "backfill/bob", r.StartedBy)
		require.Equal(t, lt, f.jobArgs(e)["logical_time"])
		require.False(t, got[lt], "each time once")
		got[lt] = true
		f.ended("daily-job", e, true)
		f.runEnds(id, pipeline.RunSucceeded)
	}
	want := map[string]bool{}
	for d := 1; d <= 5; d++ {
		want[fmt.Sprintf("2026-01-%02dT03:00:00Z", d)] = true
	}
	require.Equal(t, want, got)
	f.eventually(func() bool {
		return f.count(`SELECT count(*) FROM pipeline_backfill WHERE finished_at IS NOT NULL`) == 1
	}, "the backfill finished")
	require.Equal(t, 5, f.count(`SELECT count(*) FROM pipeline_run WHERE status = 'succeeded'`))
}

// redeploy plays the synchronizer's apply of a new image of name: the CronJob's main
// container and the applied record say image.
func (f *execFixture) redeploy(name, image string) {
	f.t.Helper()
	cj, err := f.client.BatchV1().CronJobs(f.ns).Get(f.t.Context(), name, metav1.GetOptions{})
	require.NoError(f.t, err)
	cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image = image
	_, err = f.client.BatchV1().CronJobs(f.ns).Update(f.t.Context(), cj, metav1.UpdateOptions{})
	require.NoError(f.t, err)
	f.exec(fmt.Sprintf(`UPDATE actual_data_job_deployment SET image = '%s' WHERE data_job_name = '%s'`, image, name))
}

// jobImage returns the image the Job of execution id runs.
func (f *execFixture) jobImage(id string) string {
	f.t.Helper()
	f.pod(id)
	j, err := f.client.BatchV1().Jobs(f.ns).Get(f.t.Context(), id, metav1.GetOptions{})
	require.NoError(f.t, err)
	return j.Spec.Template.Spec.Containers[0].Image
}

// A repair runs the images the run's jobs were deployed with when it started, even after
// a deploy of a new one: the repaired node's Job runs the old image; a new run, the new.
func TestARepairRunsTheImagesOfTheRunsStart(t *testing.T) {
	f := newExecFixture(t)
	f.startExecutions()
	f.pipelineJob("pinned-job")
	old := "registry.example.com/pinned-job@sha256:" + strings.Repeat("1", 64)
	f.redeploy("pinned-job", old)
	f.putPipeline("pinned-one", `{"nodes":[{"name":"pinned-step","job_name":"pinned-job"}]}`)
	f.startStepper(f.epoch)
	id := f.startRun()
	e := f.started(id, "pinned-step")
	require.Equal(t, old, f.jobImage(e))
	f.ended("pinned-job", e, false)
	_, ns := f.nodes(id)
	require.Equal(t, old, ns["pinned-step"].Image, "recorded at the run's start")
	f.runEnds(id, pipeline.RunFailed)

	newer := "registry.example.com/pinned-job@sha256:" + strings.Repeat("2", 64)
	f.redeploy("pinned-job", newer)
	_, err := f.svc.RepairPipelineRun(t.Context(), team, "pinned-one", id)
	require.NoError(t, err)
	e = f.started(id, "pinned-step")
	require.Equal(t, old, f.jobImage(e), "the repair runs the image of the run's start")
	f.ended("pinned-job", e, true)
	ns = f.runEnds(id, pipeline.RunSucceeded)
	require.Equal(t, 2, ns["pinned-step"].Attempt)

	id = f.startRun()
	e = f.started(id, "pinned-step")
	require.Equal(t, newer, f.jobImage(e), "a new run runs the image deployed now")
	f.ended("pinned-job", e, true)
}
