package tracker_test

import (
	"cmp"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/devenv"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/maintenance"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/tracker"
)

// holdLabel is a node selector no node has: pods of a CronJob rendered with it stay
// unscheduled, so kwok leaves them alone and the test plays the kubelet, writing their
// status itself.
const holdLabel = "datajobs.test/hold"

// execFixture runs the execution tracker and the leader's maintenance services beside it
// (without the CronJob synchronizer unless asked).
type execFixture struct {
	*fixture
	cancel context.CancelFunc
	done   chan struct{}
	// pipeline is the pipeline whose runs the pipeline tests read (default diamond).
	pipeline string
}

func newExecFixture(t *testing.T) *execFixture {
	t.Helper()
	f := &execFixture{fixture: newFixture(t)}
	// The execution tracker runs alone here: in serve, the synchronizer's term has made the
	// job pods' ServiceAccount, without which the apiserver admits no pod of a Job.
	_, err := kube.NewWriter(f.client, f.ns).EnsureJobServiceAccount(t.Context(), kube.DefaultJobServiceAccount, "test")
	require.NoError(t, err)
	// And the team's, which its pods run as (docs/profiles.md).
	_, err = kube.NewWriter(f.client, f.ns).EnsureJobServiceAccount(t.Context(), "datajobs-job-"+team, "test")
	require.NoError(t, err)
	t.Cleanup(f.stopExecutions)
	return f
}

func (f *execFixture) startExecutions() { f.startExecutionsWith(tracker.Config{}) }

// startExecutionsWith starts the execution tracker with cfg, the fixture's settings where
// cfg has none, and the leader's maintenance services beside it, as serve does.
func (f *execFixture) startExecutionsWith(cfg tracker.Config) {
	f.startStages(cfg, maintenance.RetentionConfig{})
}

// startStages starts the execution tracker with cfg and the maintenance services, the
// retention with retention; the missed runs and lateness are checked every 300 ms.
func (f *execFixture) startStages(cfg tracker.Config, retention maintenance.RetentionConfig) {
	cfg.Namespace, cfg.Interval, cfg.StartTimeout = f.ns, time.Hour, time.Hour
	cfg.ImagePullGrace = cmp.Or(cfg.ImagePullGrace, 2*time.Second)
	backfills := maintenance.NewBackfills(maintenance.BackfillsConfig{}, f.db)
	cfg.OnFinal = backfills.Kick
	x := tracker.New(cfg, f.db, f.client)
	m := maintenance.New(maintenance.Config{Listener: f.db},
		maintenance.NewMissedRuns(maintenance.MissedRunsConfig{Settings: maintenance.Settings{Interval: 300 * time.Millisecond}, Jobs: x}, f.db).Service(),
		maintenance.NewLateness(maintenance.LatenessConfig{Settings: maintenance.Settings{Interval: 300 * time.Millisecond}, Jobs: x}, f.db).Service(),
		backfills.Service(), maintenance.NewRetention(retention, f.db).Service())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		wg.Go(func() { _ = x.Run(ctx, f.epoch) })
		wg.Go(func() { _ = m.Run(ctx, f.epoch) })
		wg.Wait()
	}()
	f.cancel, f.done = cancel, done
}

func (f *execFixture) stopExecutions() {
	if f.cancel != nil {
		f.cancel()
		<-f.done
		f.cancel = nil
	}
}

// heldJob creates a data job, its desired deployment, and its CronJob as the synchronizer
// renders it, changed so that its pods are never scheduled and a failure is final at once
// (backoffLimit 0), and suspended: the test plays the scheduler. The CronJob controller
// fires the */5 schedule of createJob for real (a probe saw its scheduled run recorded
// submitted within a minute of "* * * * *"); a test that straddled a :x0 or :x5 boundary
// got that run, and its manual start answered "already executing" (seen under load in
// TestDeletingAJobCancelsItsPendingAndRunningExecutions). Manual and catch-up runs are
// created from the template by the leader, which a suspended CronJob does not stop.
func (f *execFixture) heldJob(name string) job.Job {
	f.t.Helper()
	j := f.createJob(name)
	f.deploy(name, job.DeploymentChange{JobVersion: ptr("v1")})
	f.heldCronJob(j)
	return j
}

// heldCronJob creates the CronJob of j's deployment, its pods held.
func (f *execFixture) heldCronJob(j job.Job) {
	f.t.Helper()
	name := j.Name
	d, err := f.svc.GetDeployment(f.t.Context(), team, name)
	require.NoError(f.t, err)
	cj, _ := kube.Render(j, d.Deployment, f.render)
	spec := &cj.Spec.JobTemplate.Spec
	spec.BackoffLimit = ptr(int32(0))
	spec.Template.Spec.NodeSelector = map[string]string{holdLabel: "true"}
	cj.Spec.Suspend = ptr(true)
	_, err = f.client.BatchV1().CronJobs(f.ns).Create(f.t.Context(), cj, metav1.CreateOptions{})
	require.NoError(f.t, err)
}

func (f *execFixture) run(name string, args string) string {
	f.t.Helper()
	e, err := f.svc.StartExecution(f.t.Context(), team, name, service.ExecutionRequest{Args: json.RawMessage(args)}, "alice", "op-"+name)
	require.NoError(f.t, err)
	return e.ID
}

func (f *execFixture) execution(name, id string) job.Execution {
	f.t.Helper()
	e, err := f.svc.GetExecution(f.t.Context(), team, name, id)
	require.NoError(f.t, err)
	return e
}

// status waits until the execution has the status, and returns it.
func (f *execFixture) status(name, id string, want job.ExecutionStatus) job.Execution {
	f.t.Helper()
	var e job.Execution
	require.Eventually(f.t, func() bool {
		e = f.execution(name, id)
		return e.Status == string(want)
	}, 60*time.Second, 20*time.Millisecond, "execution %s never became %s (last: %+v)", id, want, &e)
	return e
}

// pod waits for the pod of the execution's Job and returns it.
func (f *execFixture) pod(id string) *corev1.Pod {
	f.t.Helper()
	var p *corev1.Pod
	require.Eventually(f.t, func() bool {
		pods, err := f.client.CoreV1().Pods(f.ns).List(f.t.Context(), metav1.ListOptions{LabelSelector: kube.LabelJobName + "=" + id})
		require.NoError(f.t, err)
		if len(pods.Items) == 0 {
			return false
		}
		p = &pods.Items[0]
		return true
	}, 30*time.Second, 20*time.Millisecond, "no pod for %s", id)
	return p
}

// kubelet writes the pod's status as a kubelet would.
func (f *execFixture) kubelet(p *corev1.Pod, phase corev1.PodPhase, state corev1.ContainerState, reason string) {
	f.t.Helper()
	require.Eventually(f.t, func() bool {
		return devenv.SetPodStatus(f.t.Context(), f.client, p, phase, reason, state) == nil
	}, 10*time.Second, 20*time.Millisecond)
}

func running() corev1.ContainerState {
	return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}
}

func exited(code int32, reason, msg string) corev1.ContainerState {
	now := metav1.Now()
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, Message: msg, StartedAt: now, FinishedAt: now}}
}

func (f *execFixture) jobGone(id string) bool {
	_, err := f.client.BatchV1().Jobs(f.ns).Get(f.t.Context(), id, metav1.GetOptions{})
	return apierrors.IsNotFound(err)
}

func TestManualStartCreatesTheJobFromTheCronJobWithItsArgs(t *testing.T) {
	f := newExecFixture(t)
	f.heldJob("args-job")
	f.startExecutions()
	id := f.run("args-job", `{"day":"2026-11-30","n":3}`)

	var j *batchv1.Job
	require.Eventually(t, func() bool {
		var err error
		j, err = f.client.BatchV1().Jobs(f.ns).Get(t.Context(), id, metav1.GetOptions{})
		return err == nil
	}, 30*time.Second, 10*time.Millisecond)
	require.Equal(t, "op-args-job", j.Annotations[kube.AnnotationOpID])
	require.Equal(t, "alice", j.Annotations[kube.AnnotationStartedBy])
	require.Equal(t, "manual", j.Annotations[kube.AnnotationExecutionType])
	c := j.Spec.Template.Spec.Containers[0]
	require.Len(t, c.Args, 2)
	require.Equal(t, "--arguments", c.Args[0])
	require.JSONEq(t, `{"day":"2026-11-30","n":3}`, c.Args[1])
	require.Equal(t, "args-job", j.OwnerReferences[0].Name)

	p := f.pod(id)
	f.kubelet(p, corev1.PodRunning, running(), "")
	e := f.status("args-job", id, job.ExecRunning)
	require.Equal(t, "manual", e.Type)
	require.Equal(t, "v1", e.JobVersion)

	_, err := f.svc.StartExecution(t.Context(), team, "args-job", service.ExecutionRequest{}, "bob", "op-2")
	require.Equal(t, job.KindConflict, job.KindOf(err), "a second start while one runs: %v", err)
}

func TestTrueOutcomesOfFailedPods(t *testing.T) {
	f := newExecFixture(t)
	f.startExecutions()
	for _, tt := range []struct {
		name    string
		state   corev1.ContainerState
		status  job.ExecutionStatus
		message string
		code    int32
		reason  string
	}{
		{"msg-user-error", exited(1, "Error", `{"status": "User error", "vdk_version": "0.3.1"}`), job.ExecUserError, "User error (vdk 0.3.1)", 1, "Error"},
		{"msg-platform-error", exited(1, "Error", `{"status": "Platform error", "vdk_version": "0.3.1"}`), job.ExecPlatformError, "Platform error (vdk 0.3.1)", 1, "Error"},
		{"oom-killed", exited(137, "OOMKilled", ""), job.ExecUserError, "out of memory", 137, "OOMKilled"},
		{"exit-no-message", exited(2, "Error", ""), job.ExecUserError, "exited with code 2", 2, "Error"},
	} {
		// Not subtests: the fixture's helpers fail the parent test.
		f.heldJob(tt.name)
		id := f.run(tt.name, "")
		p := f.pod(id)
		f.kubelet(p, corev1.PodRunning, running(), "")
		f.status(tt.name, id, job.ExecRunning)
		f.kubelet(p, corev1.PodFailed, tt.state, "")
		e := f.status(tt.name, id, tt.status)
		require.Contains(t, e.Message, tt.message, tt.name)
		require.NotNil(t, e.EndTime, tt.name)
		// The console shows how it ended: the exit code and Kubernetes' reason.
		require.NotNil(t, e.ExitCode, tt.name)
		require.Equal(t, tt.code, *e.ExitCode, tt.name)
		require.Equal(t, tt.reason, e.TerminationReason, tt.name)
	}
}

func TestDeadlineExceededIsAUserError(t *testing.T) {
	f := newExecFixture(t)
	j := f.createJob("deadline-job")
	f.deploy("deadline-job", job.DeploymentChange{JobVersion: ptr("v1")})
	d, err := f.svc.GetDeployment(t.Context(), team, "deadline-job")
	require.NoError(t, err)
	cj, _ := kube.Render(j, d.Deployment, f.render)
	cj.Spec.JobTemplate.Spec.ActiveDeadlineSeconds = ptr(int64(1))
	cj.Spec.JobTemplate.Spec.Template.Spec.NodeSelector = map[string]string{holdLabel: "true"}
	_, err = f.client.BatchV1().CronJobs(f.ns).Create(t.Context(), cj, metav1.CreateOptions{})
	require.NoError(t, err)
	f.startExecutions()

	id := f.run("deadline-job", "")
	f.kubelet(f.pod(id), corev1.PodRunning, running(), "")
	e := f.status("deadline-job", id, job.ExecUserError)
	require.Contains(t, e.Message, "longer than its time limit of 1s")
	require.Equal(t, "DeadlineExceeded", e.TerminationReason)
}

func TestImagePullFailurePastTheGraceIsAPlatformErrorAndStopsTheJob(t *testing.T) {
	f := newExecFixture(t)
	f.heldJob("pull-job")
	f.startExecutions()
	id := f.run("pull-job", "")
	f.kubelet(f.pod(id), corev1.PodPending, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "manifest unknown"}}, "")
	e := f.status("pull-job", id, job.ExecPlatformError)
	require.Contains(t, e.Message, "could not be pulled")
	require.Eventually(t, func() bool { return f.jobGone(id) }, 30*time.Second, 20*time.Millisecond, "the Job is stopped")
}

func TestJobDeletedByHandMidRunIsARecordLostPlatformError(t *testing.T) {
	f := newExecFixture(t)
	f.heldJob("lost-job")
	f.startExecutions()
	id := f.run("lost-job", "")
	f.kubelet(f.pod(id), corev1.PodRunning, running(), "")
	f.status("lost-job", id, job.ExecRunning)

	require.NoError(t, f.client.BatchV1().Jobs(f.ns).Delete(t.Context(), id, metav1.DeleteOptions{PropagationPolicy: ptr(metav1.DeletePropagationBackground)}))
	e := f.status("lost-job", id, job.ExecPlatformError)
	require.True(t, strings.HasPrefix(e.Message, "execution record lost: "), e.Message)
}

func TestJobGoneWhileTheServiceWasStoppedIsFoundByTheNextLeader(t *testing.T) {
	f := newExecFixture(t)
	f.heldJob("gone-job")
	f.startExecutions()
	id := f.run("gone-job", "")
	f.kubelet(f.pod(id), corev1.PodRunning, running(), "")
	f.status("gone-job", id, job.ExecRunning)

	f.stopExecutions()
	require.NoError(t, f.client.BatchV1().Jobs(f.ns).Delete(t.Context(), id, metav1.DeleteOptions{PropagationPolicy: ptr(metav1.DeletePropagationBackground)}))
	require.Eventually(t, func() bool { return f.jobGone(id) }, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, "running", f.execution("gone-job", id).Status, "nobody watched")

	f.startExecutions()
	e := f.status("gone-job", id, job.ExecPlatformError)
	require.Contains(t, e.Message, "execution record lost")
}

func TestCancelDeletesTheJobAndRecordsCancelledOnceItIsGone(t *testing.T) {
	f := newExecFixture(t)
	f.heldJob("cancel-job")
	f.startExecutions()
	id := f.run("cancel-job", "")
	f.kubelet(f.pod(id), corev1.PodRunning, running(), "")
	f.status("cancel-job", id, job.ExecRunning)

	_, err := f.svc.CancelExecution(t.Context(), team, "cancel-job", id, "bob")
	require.NoError(t, err)
	e := f.status("cancel-job", id, job.ExecCancelled)
	require.NotNil(t, e.EndTime)
	require.True(t, f.jobGone(id), "cancelled is recorded only once the Job is gone")
	_, err = f.svc.CancelExecution(t.Context(), team, "cancel-job", id, "bob")
	require.Equal(t, job.KindInvalid, job.KindOf(err))
}

func TestSuccessAndAScheduledRunThroughKwokAndTheCronJobController(t *testing.T) {
	f := newExecFixture(t)
	f.createJob("tick-job")
	f.deploy("tick-job", job.DeploymentChange{JobVersion: ptr("v1"), Schedule: ptr("* * * * *")})
	f.start() // the CronJob synchronizer renders and applies the CronJob
	f.synced("tick-job")
	f.startExecutions()

	id := f.run("tick-job", "")
	e := f.status("tick-job", id, job.ExecSucceeded)
	require.Equal(t, "manual", e.Type)
	require.NotNil(t, e.EndTime)

	// The CronJob controller fires within a minute: its run is recorded as scheduled.
	var sched job.Execution
	require.Eventually(t, func() bool {
		execs, err := f.svc.ListExecutions(t.Context(), team, "tick-job", []string{"succeeded"})
		require.NoError(t, err)
		for _, x := range execs {
			if x.Type == job.ExecScheduled {
				sched = x
				return true
			}
		}
		return false
	}, 90*time.Second, 100*time.Millisecond, "no scheduled run recorded")
	require.Equal(t, "scheduled/runtime", sched.StartedBy)
	require.Equal(t, "v1", sched.JobVersion, "the snapshot is the applied deployment")

	// The job row carries the last final execution, for the jobs query.
	conn, err := pgx.Connect(t.Context(), f.dbURL)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(t.Context()))
	var status, last string
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT last_execution_status, last_execution_id FROM data_job WHERE name = 'tick-job'`).Scan(&status, &last))
	require.Equal(t, "succeeded", status)
	require.Equal(t, sched.ID, last, "the scheduled run ended last")
}

// job waits for the execution's Job and returns it.
func (f *execFixture) job(id string) *batchv1.Job {
	f.t.Helper()
	var j *batchv1.Job
	require.Eventually(f.t, func() bool {
		var err error
		j, err = f.client.BatchV1().Jobs(f.ns).Get(f.t.Context(), id, metav1.GetOptions{})
		return err == nil
	}, 30*time.Second, 10*time.Millisecond, "no Job for %s", id)
	return j
}

func TestASubmittedExecutionWhoseJobWasDeletedBeforeItsPodRanIsLostNotStartedAgain(t *testing.T) {
	f := newExecFixture(t)
	f.heldJob("early-delete")
	f.startExecutions()
	id := f.run("early-delete", "")
	j := f.job(id)
	require.Equal(t, "submitted", f.execution("early-delete", id).Status, "its pod never runs")

	require.NoError(t, f.client.BatchV1().Jobs(f.ns).Delete(t.Context(), id, metav1.DeleteOptions{PropagationPolicy: ptr(metav1.DeletePropagationBackground)}))
	e := f.status("early-delete", id, job.ExecPlatformError)
	require.True(t, strings.HasPrefix(e.Message, "execution record lost: "), e.Message)
	require.NotNil(t, e.EndTime)
	again, err := f.client.BatchV1().Jobs(f.ns).Get(t.Context(), id, metav1.GetOptions{})
	if err == nil {
		require.Equal(t, j.UID, again.UID, "not created again")
	} else {
		require.True(t, apierrors.IsNotFound(err), "%v", err)
	}
}

func TestASubmittedExecutionIsCreatedByTheNextTermUnlessItsJobWasCreatedAndIsGone(t *testing.T) {
	f := newExecFixture(t)
	f.heldJob("never-created")
	f.heldJob("gone-meanwhile")

	// Started while no leader runs: the next term creates its Job.
	fresh := f.run("never-created", "")
	f.startExecutions()
	f.job(fresh)

	// Created by one term, deleted while no leader runs: the next term records it lost.
	lost := f.run("gone-meanwhile", "")
	f.job(lost)
	require.Eventually(t, func() bool {
		var created bool
		conn, err := pgx.Connect(t.Context(), f.dbURL)
		require.NoError(t, err)
		defer conn.Close(context.WithoutCancel(t.Context()))
		require.NoError(t, conn.QueryRow(t.Context(), `SELECT job_created_at IS NOT NULL FROM data_job_execution WHERE id = $1`, lost).Scan(&created))
		return created
	}, 30*time.Second, 10*time.Millisecond, "the Job's creation is recorded")
	f.stopExecutions()
	require.NoError(t, f.client.BatchV1().Jobs(f.ns).Delete(t.Context(), lost, metav1.DeleteOptions{PropagationPolicy: ptr(metav1.DeletePropagationBackground)}))
	require.Eventually(t, func() bool { return f.jobGone(lost) }, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, "submitted", f.execution("gone-meanwhile", lost).Status, "nobody watched")

	f.startExecutions()
	e := f.status("gone-meanwhile", lost, job.ExecPlatformError)
	require.Contains(t, e.Message, "execution record lost")
	require.True(t, f.jobGone(lost), "not started again")
	require.Equal(t, "submitted", f.execution("never-created", fresh).Status, "the other one still waits for its pod")
}
