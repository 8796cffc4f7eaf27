package tracker_test

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/pipeline"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/stepper"
)

// The pipeline stepper (internal/stepper) against the execution tracker on kwok: each node
// is a manual execution whose Job the tracker creates from its job's CronJob; the test
// plays the kubelet of the held pods. These tests live beside the tracker's fixtures.

// pipelineJob is a held job (pulled pods end when the test says) with its applied
// deployment recorded, as the synchronizer records it.
func (f *execFixture) pipelineJob(name string) {
	f.t.Helper()
	f.heldJob(name)
	f.recordApplied(name)
}

// recordApplied records the deployment of name applied, as the synchronizer does once its
// CronJob is written.
func (f *execFixture) recordApplied(name string) {
	f.t.Helper()
	f.exec(fmt.Sprintf(`INSERT INTO actual_data_job_deployment (data_job_name, job_uid, generation, team,
		deployment_version_sha, git_commit_sha, vdk_version, python_version, schedule, enabled, last_deployed_by, last_deployed_date,
		resources_cpu_request_millis, resources_cpu_limit_millis, resources_memory_request_bytes, resources_memory_limit_bytes)
	SELECT j.name, j.uid, j.generation, j.team, 'h', 'v1', '', '3.11', '*/5 * * * *', false, 'alice', now(), 1000, 2000, 524288000, 1048576000
	FROM data_job j WHERE j.name = '%s'`, name))
}

// startStepper runs a stepper of epoch beside the tracker until the test ends or the
// returned stop is called.
func (f *execFixture) startStepper(epoch int64) (stop func()) {
	return f.startStepperWith(stepper.Config{Settings: controller.Settings{Interval: time.Second}}, epoch)
}

// startStepperWith runs a stepper of cfg and epoch beside the tracker until the test ends
// or the returned stop is called.
func (f *execFixture) startStepperWith(cfg stepper.Config, epoch int64) (stop func()) {
	s := stepper.New(cfg, f.db)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.Run(ctx, epoch) })
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	f.t.Cleanup(stop)
	return stop
}

// diamondPipeline stores extract → left, right → join (join's trigger rule given) and
// starts a run; it returns the run's id.
func (f *execFixture) diamondPipeline(joinRule pipeline.TriggerRule) int64 {
	f.t.Helper()
	for _, n := range []string{"extract-job", "left-job", "right-job", "join-job"} {
		f.pipelineJob(n)
	}
	body := fmt.Sprintf(`{"nodes":[
		{"name":"extract","job_name":"extract-job","arguments":{"node":"extract"}},
		{"name":"left-side","job_name":"left-job","depends_on":["extract"],"arguments":{"node":"left"}},
		{"name":"right-side","job_name":"right-job","depends_on":["extract"]},
		{"name":"join-all","job_name":"join-job","depends_on":["left-side","right-side"],"trigger_rule":%q}]}`, joinRule)
	_, _, err := f.svc.PutPipeline(f.t.Context(), team, "diamond", []byte(body), "alice", "op")
	require.NoError(f.t, err)
	id, err := f.svc.StartPipelineRun(f.t.Context(), team, "diamond", service.RunRequest{Arguments: []byte(`{"region":"eu","node":"run"}`)}, "alice")
	require.NoError(f.t, err)
	return id
}

// nodes reads the run's nodes by name (a run of the pipeline f.pipeline, default diamond).
func (f *execFixture) nodes(id int64) (pipeline.RunStatus, map[string]pipeline.NodeRun) {
	f.t.Helper()
	r, err := f.svc.GetPipelineRun(f.t.Context(), team, cmp.Or(f.pipeline, "diamond"), id)
	require.NoError(f.t, err)
	out := map[string]pipeline.NodeRun{}
	for _, n := range r.Nodes {
		out[n.Name] = n
	}
	return r.Status, out
}

// started waits until node has an execution and returns its id.
func (f *execFixture) started(id int64, node string) string {
	f.t.Helper()
	var exec string
	f.eventually(func() bool {
		_, ns := f.nodes(id)
		if e := ns[node].ExecutionID; e != nil && ns[node].Status == pipeline.Running {
			exec = *e
			return true
		}
		return false
	}, "node "+node+" started")
	return exec
}

// ended plays the kubelet of the execution's pod: success, or exit code 1.
func (f *execFixture) ended(name, exec string, ok bool) {
	f.t.Helper()
	if ok {
		f.succeed(name, exec)
		return
	}
	f.kubelet(f.pod(exec), corev1.PodFailed, exited(1, "Error", ""), "")
	f.status(name, exec, job.ExecUserError)
}

// runEnds waits for the run's final status and returns its nodes.
func (f *execFixture) runEnds(id int64, want pipeline.RunStatus) map[string]pipeline.NodeRun {
	f.t.Helper()
	var ns map[string]pipeline.NodeRun
	f.eventually(func() bool {
		var s pipeline.RunStatus
		s, ns = f.nodes(id)
		return s == want
	}, "run "+string(want))
	return ns
}

func (f *execFixture) jobCount() int {
	f.t.Helper()
	jobs, err := f.client.BatchV1().Jobs(f.ns).List(f.t.Context(), metav1.ListOptions{})
	require.NoError(f.t, err)
	return len(jobs.Items)
}

// The diamond runs in order, each node once, with the run's and the node's arguments and
// logical_time reaching the Job; a leader restart mid-run and a second stepper racing the
// first start nothing twice, and a deposed one starts nothing.
func TestAPipelineDiamondRunsInOrderOnceThroughRestartsAndRacingSteppers(t *testing.T) {
	f := newExecFixture(t)
	f.startExecutions()
	id := f.diamondPipeline(pipeline.AllSuccess)
	stop := f.startStepper(f.epoch)
	f.startStepper(f.epoch)     // a second replica of the same term racing the first
	f.startStepper(f.epoch - 1) // a deposed leader: fenced off, it starts nothing

	a := f.started(id, "extract")
	got := f.jobArgs(a) // the tracker created its Job
	require.Equal(t, "extract", got["node"], "the node's arguments over the run's")
	require.Equal(t, "eu", got["region"])
	require.NotEmpty(t, got["logical_time"])
	_, ns := f.nodes(id)
	require.Equal(t, "waiting for extract", ns["left-side"].Message)
	require.Nil(t, ns["join-all"].ExecutionID)
	require.Equal(t, 1, f.jobCount(), "nothing downstream starts before extract ends")

	f.ended("extract-job", a, true)
	b, c := f.started(id, "left-side"), f.started(id, "right-side")
	stop() // the leader stops mid-run; the next term goes on from the rows
	f.startStepper(f.epoch)
	f.ended("left-job", b, true)
	f.eventually(func() bool {
		_, ns = f.nodes(id)
		return ns["join-all"].Message == "waiting for right-side"
	}, "join-all waits for right-side only")
	f.ended("right-job", c, true)
	d := f.started(id, "join-all")
	f.ended("join-job", d, true)
	ns = f.runEnds(id, pipeline.RunSucceeded)
	for _, n := range ns {
		require.Equal(t, pipeline.Succeeded, n.Status, n.Name)
		require.Equal(t, 1, n.Attempt, n.Name)
	}
	require.Equal(t, 4, f.count(`SELECT count(*) FROM data_job_execution`), "every node started exactly once")
	e := f.execution("join-job", d)
	require.Equal(t, pipeline.StartedBy(team, "diamond", id), e.StartedBy)
	require.Equal(t, job.ExecManual, e.Type)
}

// The root failing makes every other node upstream_failed with no Job created for it; a
// repair runs again only what failed and its downstream, in the same run.
func TestAFailedRootFailsThePipelineAndARepairRunsOnlyWhatFailed(t *testing.T) {
	f := newExecFixture(t)
	f.startExecutions()
	id := f.diamondPipeline(pipeline.AllSuccess)
	f.startStepper(f.epoch)
	a := f.started(id, "extract")
	f.ended("extract-job", a, false)
	ns := f.runEnds(id, pipeline.RunFailed)
	require.Equal(t, pipeline.UserError, ns["extract"].Status)
	for _, n := range []string{"left-side", "right-side", "join-all"} {
		require.Equal(t, pipeline.UpstreamFailed, ns[n].Status, n)
		require.Nil(t, ns[n].ExecutionID, n)
	}
	require.Equal(t, 1, f.jobCount(), "no Job for the nodes that never ran")

	// Repair: everything failed, so everything again; this time the left branch fails.
	again, err := f.svc.RepairPipelineRun(t.Context(), team, "diamond", id)
	require.NoError(t, err)
	require.Len(t, again, 4)
	a = f.started(id, "extract")
	f.ended("extract-job", a, true)
	b, c := f.started(id, "left-side"), f.started(id, "right-side")
	f.ended("left-job", b, false)
	f.ended("right-job", c, true)
	ns = f.runEnds(id, pipeline.RunFailed)
	require.Equal(t, pipeline.UpstreamFailed, ns["join-all"].Status)

	again, err = f.svc.RepairPipelineRun(t.Context(), team, "diamond", id)
	require.NoError(t, err)
	require.Equal(t, []string{"left-side", "join-all"}, again, "only what failed and its downstream")
	b = f.started(id, "left-side")
	f.ended("left-job", b, true)
	d := f.started(id, "join-all")
	f.ended("join-job", d, true)
	ns = f.runEnds(id, pipeline.RunSucceeded)
	require.Equal(t, 3, ns["left-side"].Attempt)
	require.Equal(t, 2, ns["right-side"].Attempt, "the branch that succeeded was not run again")
	require.Equal(t, 1, f.count(`SELECT count(*) FROM data_job_execution WHERE job_name = 'right-job'`), "the right branch ran once in all")
}

// all_done runs the join after a failed branch; a deployment deleted while its node runs
// cancels the node, and the run fails.
func TestAllDoneRunsAfterAFailureAndADeletedDeploymentFailsThePipelineRun(t *testing.T) {
	f := newExecFixture(t)
	f.startExecutions()
	id := f.diamondPipeline(pipeline.AllDone)
	f.startStepper(f.epoch)
	f.ended("extract-job", f.started(id, "extract"), true)
	b, c := f.started(id, "left-side"), f.started(id, "right-side")
	f.ended("left-job", b, false)
	f.ended("right-job", c, true)
	d := f.started(id, "join-all")
	f.kubelet(f.pod(d), corev1.PodRunning, running(), "")
	require.NoError(t, f.svc.DeleteDeployment(t.Context(), team, "join-job"))
	f.status("join-job", d, job.ExecCancelled)
	ns := f.runEnds(id, pipeline.RunFailed)
	require.Equal(t, pipeline.Cancelled, ns["join-all"].Status)
	require.Equal(t, pipeline.UserError, ns["left-side"].Status)
}

func (f *execFixture) count(q string) int {
	f.t.Helper()
	var n int
	require.NoError(f.t, f.conn().QueryRow(f.t.Context(), q).Scan(&n))
	return n
}
