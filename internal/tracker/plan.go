package tracker

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
)

// execAction is one step of an execution's plan; executeExecution carries the steps out
// in order (execute.go).
type execAction string

const (
	// execNone: the row already says what the Job shows, or there is nothing to do.
	execNone execAction = "none"
	// execCreate creates the Kubernetes Job of a manual start from the job's CronJob; with
	// an Update (the start timed out), it records that instead if the CronJob is missing.
	execCreate execAction = "create"
	// execCancel deletes the Job of a cancel (foreground: its pods go first); its delete
	// event brings the execution back to record it cancelled.
	execCancel execAction = "cancel"
	// execStop deletes the Job of an execution whose status is final while the Job still
	// runs (an image that never came); the status stands.
	execStop execAction = "stop"
	// execRecordOutcome records the status the Job and its pods show (kube.ObserveExecution).
	execRecordOutcome execAction = "record_outcome"
	// execConfirmGone asks the apiserver (not the cache) whether the Job is gone, before an
	// end is recorded because it is: a Job created a moment ago may not be in the cache yet.
	// The execution is planned again with the answer (execView.Gone).
	execConfirmGone execAction = "confirm_gone"
	// execRecordLost records the end of an execution whose Job is gone without an outcome
	// (the apiserver confirmed it): cancelled on request, or lost.
	execRecordLost execAction = "record_lost"
	// execCollectLogs keeps the log of a finished execution's pod, after its final status
	// (which marks it pending); without a pod it counts the log as lost.
	execCollectLogs execAction = "collect_logs"
)

// goneWord is the apiserver's answer to execConfirmGone.
type goneWord int

const (
	goneUnasked   goneWord = iota // not asked (yet)
	goneConfirmed                 // the apiserver has no Job of that name
	goneNot                       // the apiserver still has it: the cache is behind
)

// execView is what the term knows of an execution when it plans it: its row (nil: none),
// its Job in the cache (Live, nil: none), the final state of a Job of that name deleted
// since it was last looked at (Last, nil: none), the cached pods of that name and the
// last states of those deleted since (planExecution keeps those of the Job it looks at),
// and, once a plan asked (execConfirmGone), whether the apiserver confirmed its Job gone.
type execView struct {
	Row        *job.TrackedExecution
	Live, Last *batchv1.Job
	Pods, Gone []*corev1.Pod
	JobGone    goneWord
}

// execLimits are the tracker's settings its plans read: now the clock, PullGrace how long
// an image may fail to pull (kube.ObserveExecution), StartTimeout how long a manual start
// waits for its job's CronJob.
type execLimits struct {
	Now                     time.Time
	PullGrace, StartTimeout time.Duration
}

// confirmAgain is when an execution whose Job the apiserver has and the cache has not is
// looked at again without an event.
const confirmAgain = time.Second

// execPlan is what one reconcile of an execution does, decided by planExecution from
// what the term knows, without a read or a write.
type execPlan struct {
	ID     string
	Steps  []execAction
	Reason string
	// Row is the execution's row (nil: none, a run not recorded yet); Job the Job the plan
	// is about (the live one, or the last state of one deleted after it finished).
	Row *job.TrackedExecution
	Job *batchv1.Job
	// Update is the status to record (record_outcome, record_lost; create: the platform
	// error recorded instead when the start timed out and the CronJob is still missing).
	Update job.ExecutionUpdate
	// Pods are the pods whose logs collect_logs keeps, one per attempt, oldest first
	// (none: the pods that ran are gone).
	Pods []*corev1.Pod
	// RecheckAfter > 0 asks to look again then even without an event (a grace period runs).
	RecheckAfter time.Duration
	// Settled says the row already holds what the Job shows: the events seen are handled.
	Settled bool
	// Forget drops the row from the term's view: its Job is gone, no event will come.
	Forget bool
	// FromDeleted says the outcome is read from a deleted Job's last state, kept for a
	// retry when the record fails; KeepDeleted that the deleted Job's last state is kept
	// for the next look (its pod is still there).
	FromDeleted, KeepDeleted bool
	// Now is the clock the plan was made at.
	Now time.Time
}

// msgCancelled is the message of an execution cancelled on request.
const msgCancelled = "Cancelled on request."

// planExecution decides the one thing that brings an execution's row and its Job in line,
// from the term's view v of it, under limits l.
func planExecution(v execView, l execLimits) execPlan {
	row, live, last, pods, now, pullGrace := v.Row, v.Live, v.Last, v.Pods, l.Now, l.PullGrace
	p := execPlan{ID: idOf(row, live, last), Row: row, Now: now}
	all := append(pods[:len(pods):len(pods)], v.Gone...)
	observe := func(j *batchv1.Job) (kube.Observation, []*corev1.Pod) {
		own := controlledBy(all, j)
		return kube.ObserveExecution(j, own, now, pullGrace), own
	}
	if live == nil && last != nil && sameIncarnation(row, last) {
		o, own := observe(last)
		// A pod killed by a cancel's delete failed because of the cancel: the cancel
		// decides (below), not the exit code (137 on the real node was recorded as the
		// job's own failure, user_error).
		if f := failedWithItsPod(last, own, now); !ended(o) && f != nil && (row == nil || !row.CancelRequested) {
			last, o = f, kube.ObserveExecution(f, own, now, pullGrace)
		}
		if planned, ok := p.fromDeleted(last, o, len(controlledBy(pods, last)) > 0); ok {
			return planned
		}
	}
	if live != nil && !sameIncarnation(row, live) {
		live = nil // a Job of another incarnation of the data job: not this execution's
	}
	p.Job = live
	switch {
	case row != nil && row.Status.Final():
		return p.final(live, observe)
	case row != nil && row.CancelRequested:
		return p.cancel(live, v.JobGone, observe)
	case live == nil && row == nil:
		return p.then("no row and no Job", execNone)
	case live == nil && last == nil && slices.ContainsFunc(pods, ofJobNamed(p.ID)):
		// A pod of the Job is still cached while the Job's delete event is not seen yet:
		// the event brings the Job's last state, the pod's own its.
		return p.then("its Job is gone and its pod is still there: their delete events tell", execNone)
	case live == nil && row.StartedByLeader() && row.Status == job.ExecSubmitted && !row.JobCreated:
		return p.create(l.StartTimeout)
	case live == nil:
		return p.lost(v.JobGone, job.ExecutionUpdate{
			Status: job.ExecPlatformError, EndTime: &now,
			Message: fmt.Sprintf("execution record lost: the Kubernetes Job %s disappeared before its outcome was seen "+
				"(deleted by hand, or removed after it finished while no datajobs leader was watching).", p.ID),
		}, "its Job is gone without an outcome")
	default:
		o, _ := observe(live)
		return p.outcome(live, o, "its Job shows a status")
	}
}

// final plans for an execution whose row is final: its Job live (nil: gone) is stopped
// when it still runs, observe tells what a Job shows.
func (p execPlan) final(live *batchv1.Job, observe func(*batchv1.Job) (kube.Observation, []*corev1.Pod)) execPlan {
	if live == nil {
		p.Forget = true
		return p.then("final, and its Job is gone", execNone)
	}
	if o, _ := observe(live); live.DeletionTimestamp == nil && !ended(o) {
		// Decided while still running (an image that never came): stop it. A Job whose
		// pod succeeded is left to the Job controller to complete.
		return p.then("final while its Job still runs", execStop)
	}
	return p.then("final, and its Job ended", execNone)
}

// cancel plans for an execution whose cancel was requested: its Job live (nil: gone,
// jobGone what the apiserver said of it) is deleted unless it ended first.
func (p execPlan) cancel(live *batchv1.Job, jobGone goneWord, observe func(*batchv1.Job) (kube.Observation, []*corev1.Pod)) execPlan {
	if live == nil {
		now := p.Now
		u := job.ExecutionUpdate{Status: job.ExecCancelled, Message: cmp.Or(p.Row.CancelMessage, msgCancelled), EndTime: &now}
		return p.lost(jobGone, u, "cancel requested and its Job is gone")
	}
	if o, _ := observe(live); ended(o) {
		return p.outcome(live, o, "it ended before the cancel reached it")
	}
	if live.DeletionTimestamp == nil {
		return p.then("cancel requested", execCancel)
	}
	return p.then("its Job is being deleted: the delete event brings it back", execNone)
}

// fromDeleted plans from the last state of the deleted Job last (o, what it shows; live
// whether a pod of it is still cached); ok is false when that state tells nothing and the
// plan goes on.
func (p execPlan) fromDeleted(last *batchv1.Job, o kube.Observation, live bool) (execPlan, bool) {
	under := p.Row == nil || !p.Row.Status.Final()
	switch {
	case ended(o) && !under:
		return p.then("its Job was deleted after its final status was recorded", execNone), true
	case ended(o):
		p.FromDeleted = true
		return p.outcome(last, o, "its Job was deleted after it finished: its last state has the outcome"), true
	case under && live:
		// The garbage collector deletes the pods after their Job (or their events are
		// behind the Job's): the last state of each tells whether the run ended.
		p.KeepDeleted = true
		return p.then("its Job was deleted and its pod is still there: the pod's last state tells", execNone), true
	}
	return p, false
}

// outcome plans the recording of what Job j shows (o): nothing when the row already says
// it, else the status, then the log of a final one, then a stop of a Job whose status was
// decided while it still runs.
func (p execPlan) outcome(j *batchv1.Job, o kube.Observation, reason string) execPlan {
	p.Job, p.RecheckAfter = j, o.RecheckAfter
	if p.Row != nil && p.Row.Status == o.Status && (o.Status.Final() || p.Row.Message == o.Message) {
		p.Settled = true
		return p.then("the row already says "+string(o.Status), execNone)
	}
	p.Update = job.ExecutionUpdate{
		Status: o.Status, Message: o.Message, StartTime: o.Start, EndTime: o.End,
		ExitCode: o.ExitCode, TerminationReason: o.Reason,
	}
	steps := []execAction{execRecordOutcome}
	if o.Status.Final() && (o.Pod != nil || j.Status.Succeeded+j.Status.Failed > 0) {
		// Its log is kept next, pending meanwhile (the API reads it from the pod). A Job
		// whose pods ran and are gone already has a log nobody can read: pending, it is
		// answered as not kept, never as empty.
		p.Pods, p.Update.Log = o.Attempts, &job.StoredLog{Pending: true}
		steps = append(steps, execCollectLogs)
	}
	if o.Abandon && j.DeletionTimestamp == nil {
		steps = append(steps, execStop)
	}
	return p.then(reason, steps...)
}

// create plans the Job of a manual start whose Job was never created. Once the start has
// waited StartTimeout, a CronJob still missing ends it as a platform error (p.Update)
// instead of another try.
func (p execPlan) create(startTimeout time.Duration) execPlan {
	const reason = "a manual start (or catch-up or backfill run) whose Job was never created"
	row, now := p.Row, p.Now
	if row.StartTime == nil || now.Sub(*row.StartTime) < startTimeout {
		return p.then(reason, execCreate)
	}
	p.Update = job.ExecutionUpdate{
		Status: job.ExecPlatformError, EndTime: &now,
		Message: fmt.Sprintf("The execution could not start: the job's CronJob %s did not exist within %s of the request.", row.JobName, startTimeout),
	}
	return p.then(reason+", past its start timeout: a platform error if its CronJob is still missing", execCreate)
}

// lost plans the recording of u, the end of an execution whose Job is gone, once the
// apiserver confirmed the Job gone (jobGone): the cache may not have a Job created a
// moment ago yet. Unasked, the plan asks; one the apiserver still has is looked at again.
func (p execPlan) lost(jobGone goneWord, u job.ExecutionUpdate, reason string) execPlan {
	switch jobGone {
	case goneUnasked:
		return p.then(reason+" from the cache: ask the apiserver", execConfirmGone)
	case goneNot:
		p.RecheckAfter = confirmAgain
		return p.then("its Job is not in the cache yet: look again", execNone)
	}
	p.Update = u
	return p.then(reason, execRecordLost)
}

func (p execPlan) then(reason string, steps ...execAction) execPlan {
	p.Reason, p.Steps = reason, steps
	return p
}

// sameIncarnation reports whether Job j may be the execution's: it was made for the job
// incarnation of the row (or there is no row, or it names none).
func sameIncarnation(row *job.TrackedExecution, j *batchv1.Job) bool {
	return row == nil || row.JobUID == "" || j.Labels[kube.LabelJobUID] == row.JobUID
}

// ended reports whether an observation says the run is over by Kubernetes' or its pod's
// account: a final status that was not decided while the Job still runs.
func ended(o kube.Observation) bool { return o.Status.Final() && !o.Abandon }

// controlledBy keeps the pods Job j controls: a pod of an earlier Job of the same name is
// not its.
func controlledBy(pods []*corev1.Pod, j *batchv1.Job) []*corev1.Pod {
	own := make([]*corev1.Pod, 0, len(pods))
	for _, p := range pods {
		if metav1.IsControlledBy(p, j) {
			own = append(own, p)
		}
	}
	return own
}

// failedWithItsPod is the last state of the deleted Job j as the Job controller would have
// ended it when its latest pod (of own) failed: deleted, the Job starts no other pod, so
// that failure is the run's end, which the controller may not have written before the
// delete. Nil when the latest pod did not fail.
func failedWithItsPod(j *batchv1.Job, own []*corev1.Pod, now time.Time) *batchv1.Job {
	p := kube.LatestPod(own)
	if p == nil || p.Status.Phase != corev1.PodFailed {
		return nil
	}
	end := now
	if p.DeletionTimestamp != nil {
		end = p.DeletionTimestamp.Time
	}
	for _, c := range p.Status.ContainerStatuses {
		if t := c.State.Terminated; t != nil && !t.FinishedAt.IsZero() {
			end = t.FinishedAt.Time
		}
	}
	j = j.DeepCopy()
	j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{
		Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "JobDeleted", LastTransitionTime: metav1.NewTime(end),
		Message: "the Job was deleted after its pod failed, before Kubernetes recorded the failure",
	})
	return j
}

// ofJobNamed matches the pods whose controller is a Job named name (an orphaned pod has no
// controller any more: it is no Job's).
func ofJobNamed(name string) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool {
		c := metav1.GetControllerOf(p)
		return c != nil && c.Kind == "Job" && c.Name == name
	}
}

// idOf is the execution id: its row's, or the name of its Job.
func idOf(row *job.TrackedExecution, jobs ...*batchv1.Job) string {
	if row != nil {
		return row.ID
	}
	for _, j := range jobs {
		if j != nil {
			return j.Name
		}
	}
	return ""
}
