package tracker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
)

// execWorld is an execution as the tracker may find it: its row, its Job in the cache,
// the last state of a deleted Job of its name, and the pods of that name. Each row of the
// table builds one situation from these pieces.
type execWorld struct {
	row  *job.TrackedExecution
	live *batchv1.Job
	last *batchv1.Job
	pods []*corev1.Pod
	// gone are the last states of deleted pods of its name.
	gone []*corev1.Pod
	// A Job missing from the cache is gone in the apiserver too, unless stillThere; unasked
	// plans before the apiserver was asked (execConfirmGone).
	stillThere, unasked bool
}

// view is the world as the term knows it when it plans.
func (w execWorld) view() execView {
	v := execView{Row: w.row, Live: w.live, Last: w.last, Pods: w.pods, Gone: w.gone, JobGone: goneConfirmed}
	switch {
	case w.unasked:
		v.JobGone = goneUnasked
	case w.stillThere:
		v.JobGone = goneNot
	}
	return v
}

var planNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

const (
	planGrace        = 5 * time.Minute
	planStartTimeout = 5 * time.Minute
)

var planLimits = execLimits{Now: planNow, PullGrace: planGrace, StartTimeout: planStartTimeout}

func execRow(status job.ExecutionStatus, edit ...func(*job.TrackedExecution)) *job.TrackedExecution {
	r := &job.TrackedExecution{ID: "exec-1", JobName: "daily", JobUID: "uid-1", Type: job.ExecManual, Status: status, OpID: "op", StartedBy: "alice"}
	for _, e := range edit {
		e(r)
	}
	return r
}

func execJob(jobUID string, conds ...batchv1.JobConditionType) *batchv1.Job {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{
		Name: "exec-1", UID: types.UID("job-object-" + jobUID), CreationTimestamp: metav1.NewTime(planNow.Add(-time.Minute)),
		Labels: map[string]string{kube.LabelJob: "daily", kube.LabelJobUID: jobUID},
	}}
	for _, c := range conds {
		j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: c, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(planNow)})
	}
	return j
}

func deleting(j *batchv1.Job) *batchv1.Job {
	j.DeletionTimestamp = &metav1.Time{Time: planNow}
	return j
}

// execPod is a pod of Job j in the given state.
func execPod(j *batchv1.Job, phase corev1.PodPhase, state corev1.ContainerState, created time.Time) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: j.Name + "-pod", CreationTimestamp: metav1.NewTime(created), Labels: map[string]string{kube.LabelJobName: j.Name}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "daily", Image: "registry/daily:v1"}}},
		Status:     corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{Name: "daily", State: state}}},
	}
	p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(j, batchv1.SchemeGroupVersion.WithKind("Job"))}
	return p
}

// deletedPod marks p's delete as begun at planNow, with a 30 s grace period.
func deletedPod(p *corev1.Pod) *corev1.Pod {
	grace := int64(30)
	p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &metav1.Time{Time: planNow.Add(30 * time.Second)}, &grace
	return p
}

func runningState() corev1.ContainerState {
	return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(planNow)}}
}

func exitedState(code int32) corev1.ContainerState {
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, FinishedAt: metav1.NewTime(planNow)}}
}

// startErrorState is a container whose entrypoint the runtime could not start.
func startErrorState() corev1.ContainerState {
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 128, Reason: "StartError", FinishedAt: metav1.NewTime(planNow),
		Message: `failed to create containerd task: exec: "vdk": executable file not found in $PATH`,
	}}
}

// unschedulablePod is p as the scheduler leaves a pod that no node can take.
func unschedulablePod(p *corev1.Pod) *corev1.Pod {
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: planUnschedulable,
	})
	return p
}

const planUnschedulable = "0/1 nodes are available: 1 node(s) didn't match Pod's node selector."

// waitingForANode is a row that recorded what an unschedulablePod's run waits for.
func waitingForANode(r *job.TrackedExecution) { r.Message = "Waiting for a node: " + planUnschedulable }

func pullingState() corev1.ContainerState {
	return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "not found"}}
}

func TestPlanExecutionDecidesOneActionPerSituation(t *testing.T) {
	t.Parallel()
	live := execJob("uid-1")
	complete := execJob("uid-1", batchv1.JobComplete)
	failedJob := execJob("uid-1", batchv1.JobFailed)
	other := execJob("uid-0") // a Job of an older incarnation of the data job
	stuck := execJob("uid-1")
	succeededPodJob := execJob("uid-1")
	cancelled := func(r *job.TrackedExecution) { r.CancelRequested = true }
	created := func(r *job.TrackedExecution) { r.JobCreated = true }
	scheduled := func(r *job.TrackedExecution) { r.Type = job.ExecScheduled }
	requested := func(ago time.Duration) func(*job.TrackedExecution) {
		return func(r *job.TrackedExecution) { at := planNow.Add(-ago); r.StartTime = &at }
	}
	for _, tc := range []struct {
		behaviour string
		world     execWorld
		want      []execAction
		status    job.ExecutionStatus // of the update, when one is recorded
	}{
		{"a manual start without a Job creates it", execWorld{row: execRow(job.ExecSubmitted)}, []execAction{execCreate}, ""},
		{
			"a manual start within its start timeout tries again while its CronJob is missing",
			execWorld{row: execRow(job.ExecSubmitted, requested(planStartTimeout-time.Second))},
			[]execAction{execCreate},
			"",
		},
		{
			"a manual start past its start timeout is a platform error if its CronJob is still missing",
			execWorld{row: execRow(job.ExecSubmitted, requested(planStartTimeout))},
			[]execAction{execCreate},
			job.ExecPlatformError,
		},
		{
			"a Job missing from the cache is confirmed gone by the apiserver before the execution is lost",
			execWorld{row: execRow(job.ExecRunning, created), unasked: true},
			[]execAction{execConfirmGone},
			"",
		},
		{
			"a cancel whose Job is missing from the cache is confirmed gone by the apiserver before it is recorded",
			execWorld{row: execRow(job.ExecRunning, cancelled), unasked: true},
			[]execAction{execConfirmGone},
			"",
		},
		{
			"a Job the apiserver has and the cache has not seen yet is not lost: it is looked at again",
			execWorld{row: execRow(job.ExecSubmitted, created), stillThere: true},
			[]execAction{execNone},
			"",
		},
		{
			"a manual start whose Job was created and is gone is lost, not started again",
			execWorld{row: execRow(job.ExecSubmitted, created)},
			[]execAction{execRecordLost},
			job.ExecPlatformError,
		},
		{
			"a scheduled run whose Job is gone without an outcome is lost",
			execWorld{row: execRow(job.ExecRunning, scheduled)},
			[]execAction{execRecordLost},
			job.ExecPlatformError,
		},
		{"no row and no Job: nothing to do", execWorld{}, []execAction{execNone}, ""},
		{
			"a Job without a row is a run not recorded yet: its status is recorded",
			execWorld{live: live},
			[]execAction{execRecordOutcome},
			job.ExecSubmitted,
		},
		{
			"a running pod makes a submitted execution running",
			execWorld{row: execRow(job.ExecSubmitted, created), live: live, pods: []*corev1.Pod{execPod(live, corev1.PodRunning, runningState(), planNow)}},
			[]execAction{execRecordOutcome},
			job.ExecRunning,
		},
		{
			"a row that already says what the Job shows writes nothing",
			execWorld{row: execRow(job.ExecRunning, created), live: live, pods: []*corev1.Pod{execPod(live, corev1.PodRunning, runningState(), planNow)}},
			[]execAction{execNone},
			"",
		},
		{
			// Issue 43: a pod no node could take left its run submitted, saying nothing.
			"a pod no node can take records why its run waits",
			execWorld{row: execRow(job.ExecSubmitted, created), live: live, pods: []*corev1.Pod{unschedulablePod(execPod(live, corev1.PodPending, corev1.ContainerState{}, planNow))}},
			[]execAction{execRecordOutcome},
			job.ExecSubmitted,
		},
		{
			"a row that already says why its run waits writes nothing",
			execWorld{row: execRow(job.ExecSubmitted, created, waitingForANode), live: live, pods: []*corev1.Pod{unschedulablePod(execPod(live, corev1.PodPending, corev1.ContainerState{}, planNow))}},
			[]execAction{execNone},
			"",
		},
		{
			"a completed Job is recorded succeeded, then its log is kept",
			execWorld{row: execRow(job.ExecRunning), live: complete, pods: []*corev1.Pod{execPod(complete, corev1.PodSucceeded, exitedState(0), planNow)}},
			[]execAction{execRecordOutcome, execCollectLogs},
			job.ExecSucceeded,
		},
		{
			"a failed Job is recorded with its true outcome, then its log is kept",
			execWorld{row: execRow(job.ExecRunning), live: failedJob, pods: []*corev1.Pod{execPod(failedJob, corev1.PodFailed, exitedState(1), planNow)}},
			[]execAction{execRecordOutcome, execCollectLogs},
			job.ExecUserError,
		},
		{
			// Issue 48, item 8: a base image without vdk; the job's code never ran.
			"a failed Job whose entrypoint could not start is a platform error, then its log is kept",
			execWorld{row: execRow(job.ExecRunning), live: failedJob, pods: []*corev1.Pod{execPod(failedJob, corev1.PodFailed, startErrorState(), planNow)}},
			[]execAction{execRecordOutcome, execCollectLogs},
			job.ExecPlatformError,
		},
		{
			"an image that cannot be pulled past the grace is a platform error, the log kept and the Job stopped",
			execWorld{row: execRow(job.ExecSubmitted), live: stuck, pods: []*corev1.Pod{execPod(stuck, corev1.PodPending, pullingState(), planNow.Add(-planGrace))}},
			[]execAction{execRecordOutcome, execCollectLogs, execStop},
			job.ExecPlatformError,
		},
		{
			"a final execution whose Job still runs is stopped",
			execWorld{row: execRow(job.ExecPlatformError), live: live, pods: []*corev1.Pod{execPod(live, corev1.PodPending, pullingState(), planNow)}},
			[]execAction{execStop},
			"",
		},
		{
			"a final execution whose pod succeeded is left to the Job controller",
			execWorld{row: execRow(job.ExecSucceeded), live: succeededPodJob, pods: []*corev1.Pod{execPod(succeededPodJob, corev1.PodSucceeded, exitedState(0), planNow)}},
			[]execAction{execNone},
			"",
		},
		{
			"a final execution whose Job is being deleted is not deleted again",
			execWorld{row: execRow(job.ExecPlatformError), live: deleting(execJob("uid-1"))},
			[]execAction{execNone},
			"",
		},
		{
			"a cancel deletes the running Job",
			execWorld{row: execRow(job.ExecRunning, cancelled), live: live, pods: []*corev1.Pod{execPod(live, corev1.PodRunning, runningState(), planNow)}},
			[]execAction{execCancel},
			"",
		},
		{
			"a cancel of a Job being deleted waits for its delete event",
			execWorld{row: execRow(job.ExecRunning, cancelled), live: deleting(execJob("uid-1"))},
			[]execAction{execNone},
			"",
		},
		{
			"a cancel whose Job is gone records cancelled",
			execWorld{row: execRow(job.ExecRunning, cancelled)},
			[]execAction{execRecordLost},
			job.ExecCancelled,
		},
		{
			"a run that ended before the cancel reached it keeps its true outcome",
			execWorld{row: execRow(job.ExecRunning, cancelled), live: complete, pods: []*corev1.Pod{execPod(complete, corev1.PodSucceeded, exitedState(0), planNow)}},
			[]execAction{execRecordOutcome, execCollectLogs},
			job.ExecSucceeded,
		},
		{
			"a Job deleted after it finished tells its outcome from its last state",
			execWorld{row: execRow(job.ExecRunning), last: failedJob, pods: []*corev1.Pod{execPod(failedJob, corev1.PodFailed, exitedState(2), planNow)}},
			[]execAction{execRecordOutcome, execCollectLogs},
			job.ExecUserError,
		},
		{
			"a Job and its pod deleted after the pod succeeded tell the outcome from their last states",
			execWorld{row: execRow(job.ExecRunning, created), last: stuck, gone: []*corev1.Pod{execPod(stuck, corev1.PodSucceeded, exitedState(0), planNow)}},
			[]execAction{execRecordOutcome, execCollectLogs},
			job.ExecSucceeded,
		},
		{
			"a Job deleted after its pod failed, before the Job controller said so, ended with that failure",
			execWorld{row: execRow(job.ExecRunning, created), last: stuck, gone: []*corev1.Pod{execPod(stuck, corev1.PodFailed, exitedState(3), planNow)}},
			[]execAction{execRecordOutcome, execCollectLogs},
			job.ExecUserError,
		},
		{
			// Issue 48, item 5: recorded user_error since the deleted Job's failed pod was read
			// as the job's own failure; a delete by anyone but a cancel is not the user's.
			"a run whose Job someone deleted while it ran (its pod stopped, exit 143) is a platform error",
			execWorld{row: execRow(job.ExecRunning, created), last: stuck, gone: []*corev1.Pod{deletedPod(execPod(stuck, corev1.PodFailed, exitedState(143), planNow))}},
			[]execAction{execRecordOutcome, execCollectLogs},
			job.ExecPlatformError,
		},
		{
			"a cancelled run whose pod the cancel's delete killed (exit 137) is cancelled, not a failure of its own",
			execWorld{row: execRow(job.ExecRunning, created, cancelled), last: stuck, gone: []*corev1.Pod{execPod(stuck, corev1.PodFailed, exitedState(137), planNow)}},
			[]execAction{execRecordLost},
			job.ExecCancelled,
		},
		{
			"a Job deleted while its pod is still there waits for the pod's last state",
			execWorld{row: execRow(job.ExecRunning, created), last: stuck, pods: []*corev1.Pod{execPod(stuck, corev1.PodRunning, runningState(), planNow)}},
			[]execAction{execNone},
			"",
		},
		{
			"a Job deleted mid-run whose pod was deleted running is lost",
			execWorld{row: execRow(job.ExecRunning, created), last: stuck, gone: []*corev1.Pod{execPod(stuck, corev1.PodRunning, runningState(), planNow)}},
			[]execAction{execRecordLost},
			job.ExecPlatformError,
		},
		{
			"a Job gone from the cache before its delete event, its pod still there, waits for the events",
			execWorld{row: execRow(job.ExecRunning, created), pods: []*corev1.Pod{execPod(stuck, corev1.PodRunning, runningState(), planNow)}},
			[]execAction{execNone},
			"",
		},
		{
			"a Job deleted after its final status was recorded needs nothing",
			execWorld{row: execRow(job.ExecSucceeded), last: complete},
			[]execAction{execNone},
			"",
		},
		{
			"a Job deleted mid-run is lost, not read from its last state",
			execWorld{row: execRow(job.ExecRunning, created), last: execJob("uid-1")},
			[]execAction{execRecordLost},
			job.ExecPlatformError,
		},
		{
			"a Job of an older incarnation of the data job is not this execution's",
			execWorld{row: execRow(job.ExecSubmitted, created), live: other},
			[]execAction{execRecordLost},
			job.ExecPlatformError,
		},
		{
			"the deleted Job of an older incarnation tells this execution nothing",
			execWorld{row: execRow(job.ExecRunning, created), last: execJob("uid-0", batchv1.JobComplete)},
			[]execAction{execRecordLost},
			job.ExecPlatformError,
		},
		{
			"the pods of an earlier Job of the same name are not this Job's",
			execWorld{row: execRow(job.ExecSubmitted, created), live: live, pods: []*corev1.Pod{execPod(other, corev1.PodRunning, runningState(), planNow)}},
			[]execAction{execNone},
			"",
		},
	} {
		t.Run(tc.behaviour, func(t *testing.T) {
			t.Parallel()
			p := planExecution(tc.world.view(), planLimits)
			require.Equal(t, tc.want, p.Steps, p.Reason)
			require.Equal(t, tc.status, p.Update.Status, p.Reason)
			if tc.status != "" && tc.status.Final() {
				require.NotNil(t, p.Update.EndTime, "a final status has an end")
			}
		})
	}
}

// A pull still within its grace plans a look again when the grace ends, without an event.
func TestPlanExecutionLooksAgainWhenTheImagePullGraceEnds(t *testing.T) {
	t.Parallel()
	j := execJob("uid-1")
	pod := execPod(j, corev1.PodPending, pullingState(), planNow.Add(-time.Minute))
	p := planExecution(execWorld{row: execRow(job.ExecSubmitted, func(r *job.TrackedExecution) { r.JobCreated = true }), live: j, pods: []*corev1.Pod{pod}}.view(), planLimits)
	require.Equal(t, []execAction{execNone}, p.Steps, p.Reason)
	require.Equal(t, planGrace-time.Minute, p.RecheckAfter)
}

// A final row whose Job is gone is dropped from the term's view: no event will come.
func TestPlanExecutionForgetsAFinalExecutionWhoseJobIsGone(t *testing.T) {
	t.Parallel()
	p := planExecution(execWorld{row: execRow(job.ExecSucceeded)}.view(), planLimits)
	require.True(t, p.Forget)
	require.Equal(t, []execAction{execNone}, p.Steps)
}

// A cancel a job's delete asked for ends with the delete's message, a user's with the
// cancel's (DESIGN.md invariant 11: a user sees why the run was stopped).
func TestPlanExecutionRecordsTheMessageOfTheCancelThatWasAsked(t *testing.T) {
	t.Parallel()
	for msg, want := range map[string]string{"": msgCancelled, "the data job was deleted": "the data job was deleted"} {
		row := execRow(job.ExecRunning, func(r *job.TrackedExecution) { r.CancelRequested, r.CancelMessage = true, msg })
		p := planExecution(execWorld{row: row}.view(), planLimits)
		require.Equal(t, []execAction{execRecordLost}, p.Steps, p.Reason)
		require.Equal(t, job.ExecCancelled, p.Update.Status)
		require.Equal(t, want, p.Update.Message)
	}
}

// A Job the apiserver has and the cache has not seen yet (created a moment ago) is looked
// at again soon, without an event.
func TestPlanExecutionLooksAgainSoonAtAJobTheCacheHasNotSeenYet(t *testing.T) {
	t.Parallel()
	p := planExecution(execWorld{row: execRow(job.ExecSubmitted, func(r *job.TrackedExecution) { r.JobCreated = true }), stillThere: true}.view(), planLimits)
	require.Equal(t, []execAction{execNone}, p.Steps, p.Reason)
	require.Equal(t, confirmAgain, p.RecheckAfter)
}
