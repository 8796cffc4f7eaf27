package kube

import (
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/datajobs/datajobs/internal/job"
)

// Observation is the execution status a Job and its pods show.
type Observation struct {
	Status  job.ExecutionStatus
	Message string
	// Start is when the Job started; End when it reached its final state.
	Start, End *time.Time
	// ExitCode is the exit code of the latest pod's main container once the execution is
	// final (nil: it never exited); Reason is why it ended: the container's (Completed,
	// Error, OOMKilled), or the Job's failure reason when the Job hit its deadline or no
	// container ended (DeadlineExceeded, BackoffLimitExceeded, ...).
	ExitCode *int32
	Reason   string
	// Pod is the execution's latest pod (nil when it has none); Attempts all its pods,
	// oldest first (Attempts): each attempt's log is kept.
	Pod      *corev1.Pod
	Attempts []*corev1.Pod
	// RecheckAfter > 0 asks to look again then even without an event (a grace period runs).
	RecheckAfter time.Duration
	// Abandon is set when the Job must be deleted because its status was decided while it
	// still runs (an image that cannot be pulled).
	Abandon bool
}

// vdkTermination is what vdk-core writes as its container's termination message.
type vdkTermination struct {
	Status     string `json:"status"`
	VDKVersion string `json:"vdk_version"`
}

// vdkStatuses maps vdk-core's termination statuses to execution statuses.
var vdkStatuses = map[string]job.ExecutionStatus{
	"success":        job.ExecSucceeded,
	"user error":     job.ExecUserError,
	"platform error": job.ExecPlatformError,
	"skipped":        job.ExecSkipped,
	"cancelled":      job.ExecCancelled,
}

// platformPodReasons are pod failures the platform caused, not the job's code.
var platformPodReasons = []string{"Evicted", "NodeLost", "Shutdown", "Terminated", "UnexpectedAdmissionError", "NodeAffinity", "Preempting"}

// imagePullReasons are container waiting reasons of an image that cannot be pulled.
var imagePullReasons = []string{"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}

// ObserveExecution derives an execution's status from its Job and pods, the one place
// that does. What Kubernetes saw decides first: a deadline or an out-of-memory kill is the
// user's error, as is a non-zero exit; an image that cannot be pulled for longer than
// pullGrace, an eviction or a lost node are the platform's. The container's termination
// message (vdk-core's JSON, which the job's own code controls) may then only make the
// outcome worse, never better: a Failed condition, a non-zero exit or an OOM kill stays a
// failure whatever the message says (invariant 7). A Job never reads as succeeded unless
// Kubernetes says it completed, or its one pod succeeded (exit 0, as the kubelet reports it).
// Its message and reason are read through PodText: a pod controls them.
func ObserveExecution(j *batchv1.Job, pods []*corev1.Pod, now time.Time, pullGrace time.Duration) Observation {
	o := observe(j, pods, now, pullGrace)
	o.Message = PodText(o.Message, MessageBytes, KeepHead)
	o.Reason = PodText(o.Reason, MessageBytes, KeepHead)
	return o
}

func observe(j *batchv1.Job, pods []*corev1.Pod, now time.Time, pullGrace time.Duration) Observation {
	o := Observation{Status: job.ExecSubmitted, Pod: LatestPod(pods), Attempts: Attempts(pods)}
	if j.Status.StartTime != nil {
		o.Start = &j.Status.StartTime.Time
	}
	complete, failed := jobFinished(j)
	podEnd, podDone := podFinishedTheJob(j, o.Pod)
	if complete != nil || failed != nil || podDone {
		end := podEnd
		if c := cmp.Or(complete, failed); c != nil {
			end = c.LastTransitionTime.Time
		}
		if end.IsZero() {
			end = now
		}
		o.End = &end
		o.Status, o.Message = finalStatus(j, failed, pods, o.Pod)
		if n := max(len(pods), int(j.Status.Failed+j.Status.Succeeded)); n > 1 {
			o.Message = strings.TrimSpace(fmt.Sprintf("%s It ran %d attempts; the log keeps each.", o.Message, n))
		}
		o.ExitCode, o.Reason = termination(failed, o.Pod)
		return o
	}
	if o.Pod == nil {
		return o
	}
	if w := mainWaiting(o.Pod); w != nil && slices.Contains(imagePullReasons, w.Reason) {
		since := o.Pod.CreationTimestamp.Time
		if waited := now.Sub(since); waited >= pullGrace {
			o.Status, o.Abandon, o.End = job.ExecPlatformError, true, &now
			o.Message = fmt.Sprintf("The image %s could not be pulled for %s (%s: %s). The execution was stopped.",
				mainContainer(o.Pod).Image, waited.Round(time.Second), w.Reason, w.Message)
			return o
		} else {
			o.RecheckAfter = pullGrace - waited
		}
	}
	if ran(o.Pod) || j.Status.Failed > 0 {
		o.Status = job.ExecRunning
	} else if c := unschedulable(o.Pod); c != nil {
		o.Message = "Waiting for a node: " + c.Message
	}
	return o
}

// unschedulable is the scheduler's condition on a pod no node can take (a profile's node
// selector, affinity or GPU that no node offers), nil otherwise: the run's message says
// why it has not started while it waits.
func unschedulable(p *corev1.Pod) *corev1.PodCondition {
	for i, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// termination is the exit code and the reason of a finished execution (see Observation).
func termination(failed *batchv1.JobCondition, p *corev1.Pod) (*int32, string) {
	var code *int32
	reason := ""
	if t := mainTerminated(p); t != nil {
		c := t.ExitCode
		code, reason = &c, t.Reason
	}
	// The Job's reason when it says more than the container's: a deadline stops a
	// container that did nothing wrong, and a Job can fail without any container exit.
	if failed != nil && failed.Reason != "" && (reason == "" || failed.Reason == batchv1.JobReasonDeadlineExceeded) {
		reason = failed.Reason
	}
	return code, reason
}

// podFinishedTheJob reports a pod whose success is already the Job's, and when it ended:
// the Job needs one completion and the pod's container exited 0. The Job controller will
// mark the Job Complete, but under load only seconds later; the outcome is known now.
func podFinishedTheJob(j *batchv1.Job, p *corev1.Pod) (time.Time, bool) {
	if c := j.Spec.Completions; c != nil && *c != 1 {
		return time.Time{}, false
	}
	if p == nil || j.Spec.SuccessPolicy != nil || p.Status.Phase != corev1.PodSucceeded {
		return time.Time{}, false
	}
	t := mainTerminated(p)
	if t == nil || t.ExitCode != 0 {
		return time.Time{}, false
	}
	return t.FinishedAt.Time, true
}

// jobFinished returns the Job's true Complete (or SuccessCriteriaMet) and Failed (or
// FailureTarget) conditions, nil when absent.
func jobFinished(j *batchv1.Job) (complete, failed *batchv1.JobCondition) {
	for i := range j.Status.Conditions {
		c := &j.Status.Conditions[i]
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete, batchv1.JobSuccessCriteriaMet:
			complete = c
		case batchv1.JobFailed, batchv1.JobFailureTarget:
			failed = c
		}
	}
	if complete != nil && failed != nil {
		complete = nil // a Job is never both; trust the failure
	}
	return complete, failed
}

// finalStatus is the outcome of a finished Job: what Kubernetes says, made worse by the
// termination message when that reports worse (a "success" written by a container that was
// killed changes nothing). Of two failures of the same status both explanations are kept.
func finalStatus(j *batchv1.Job, failed *batchv1.JobCondition, pods []*corev1.Pod, last *corev1.Pod) (job.ExecutionStatus, string) {
	status, msg := job.ExecSucceeded, ""
	switch t := mainTerminated(last); {
	case failed != nil:
		status, msg = failure(j, failed, pods, last)
	case t != nil && (t.ExitCode != 0 || t.Reason == "OOMKilled"):
		// Complete, yet the last attempt's container was killed or failed: never a success.
		status, msg = killed(t, last)
	}
	ts, tmsg, ok := terminationStatus(last)
	switch {
	case !ok || severity[ts] < severity[status]:
		return status, msg
	case severity[ts] > severity[status]:
		return ts, tmsg
	default:
		return status, strings.TrimSpace(tmsg + " " + msg)
	}
}

// severity orders final statuses from the best outcome to the worst; the worse of what
// Kubernetes saw and what the container reported stands.
var severity = map[job.ExecutionStatus]int{
	job.ExecSucceeded:     0,
	job.ExecSkipped:       1,
	job.ExecCancelled:     2,
	job.ExecUserError:     3,
	job.ExecPlatformError: 4,
}

// failure explains a failed Job from what Kubernetes saw.
func failure(j *batchv1.Job, cond *batchv1.JobCondition, pods []*corev1.Pod, last *corev1.Pod) (job.ExecutionStatus, string) {
	if cond.Reason == batchv1.JobReasonDeadlineExceeded {
		limit := "its time limit"
		if d := j.Spec.ActiveDeadlineSeconds; d != nil {
			limit = fmt.Sprintf("its time limit of %s (activeDeadlineSeconds)", time.Duration(*d)*time.Second)
		}
		return job.ExecUserError, "The execution ran longer than " + limit + " and was stopped."
	}
	if t := mainTerminated(last); t != nil && t.Reason == "OOMKilled" {
		return killed(t, last)
	}
	if t, ok := deletedWhileRunning(last); ok {
		return job.ExecPlatformError, fmt.Sprintf("The Job %s or its pod was deleted while the execution ran (not by a cancel): "+
			"its container was stopped with exit code %d.", j.Name, t.ExitCode)
	}
	if reason, ok := platformFailure(last); ok {
		return job.ExecPlatformError, fmt.Sprintf("The execution's pod was stopped by the platform (%s). %d attempt(s) failed.", reason, j.Status.Failed)
	}
	if t := startFailed(last); t != nil {
		return job.ExecPlatformError, fmt.Sprintf("The image %s could not start its entrypoint (%s: %s): its base image lacks what runs the job "+
			"(vdk on PATH). The job's code never ran.", mainContainer(last).Image, t.Reason, strings.TrimSpace(t.Message))
	}
	if t := mainTerminated(last); t != nil && t.ExitCode != 0 {
		return killed(t, last)
	}
	// Every attempt failed for a reason other than the job's exit code.
	for _, p := range pods {
		if reason, ok := platformFailure(p); ok {
			return job.ExecPlatformError, fmt.Sprintf("The execution's pods were stopped by the platform (%s).", reason)
		}
	}
	return job.ExecPlatformError, fmt.Sprintf("Kubernetes failed the Job: %s: %s", cond.Reason, cond.Message)
}

// killed explains a main container that was OOM-killed or exited non-zero: the user's error.
func killed(t *corev1.ContainerStateTerminated, p *corev1.Pod) (job.ExecutionStatus, string) {
	if t.Reason != "OOMKilled" {
		msg := fmt.Sprintf("The data job exited with code %d (%s).", t.ExitCode, t.Reason)
		if t.ExitCode == UserErrorExitCode {
			msg += " vdk-core blamed the job's own code, so it was not retried."
		}
		return job.ExecUserError, msg
	}
	limit := ""
	if c := mainContainer(p); c != nil {
		if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
			limit = " of " + q.String()
		}
	}
	return job.ExecUserError, "The execution ran out of memory: it was killed for exceeding its memory limit" + limit + ". Lower its memory use or raise its memory limit."
}

// deletedWhileRunning reports a pod whose main container was stopped by a signal (exit
// 143, SIGTERM, or 137, SIGKILL past the grace period), or ended with vdk-core blaming the
// platform (PlatformErrorExitCode: the base image's plugin turns the run that the signal
// interrupted into that code, and the message lost the delete's cause), once the pod's
// delete had begun:
// the delete killed it (a delete of the pod, or of its Job, whose pods the garbage
// collector deletes), not anything the job did. The tracker read such a pod's exit 143 as
// the job's own failure (user_error) when someone deleted a running execution's Job by
// hand. A cancel's delete is the tracker's to judge (cancelled), before this. The delete
// began its grace period before the deletion timestamp; times are whole seconds, so a
// container stopped within a second before it counts, which only the signal's exit code
// tells apart from a job that failed on its own the moment its pod was deleted (exit 3 in
// TestARunWhoseJobAndPodAreDeletedBeforeTheLeaderSawItEndIsRecordedWithItsTrueOutcome).
func deletedWhileRunning(p *corev1.Pod) (*corev1.ContainerStateTerminated, bool) {
	t := mainTerminated(p)
	if p == nil || p.DeletionTimestamp == nil || t == nil || !slices.Contains([]int32{143, 137, PlatformErrorExitCode}, t.ExitCode) {
		return nil, false
	}
	began := p.DeletionTimestamp.Time
	if g := p.DeletionGracePeriodSeconds; g != nil {
		began = began.Add(-time.Duration(*g) * time.Second)
	}
	return t, !t.FinishedAt.Time.Before(began.Add(-time.Second))
}

// startReasons are the reasons a container runtime gives a container whose entrypoint it
// could not start (containerd's StartError, Docker's ContainerCannotRun, exit 128): no
// code of the job ran, its image cannot run a job (a base image without vdk, issue 48).
var startReasons = []string{"StartError", "ContainerCannotRun"}

// execFailed is what runc prints, as the container's only output, when it found the
// entrypoint but could not execute it (a script whose interpreter is missing: the dev
// stub's vdk without /bin/sh), exiting 1; the kubelet gives it as the termination message
// (FallbackToLogsOnError, kube.Render).
var execFailed = regexp.MustCompile(`^exec (\S+): (no such file or directory|exec format error|permission denied)$`)

// startFailed is the main container's termination when its entrypoint could not start.
func startFailed(p *corev1.Pod) *corev1.ContainerStateTerminated {
	t := mainTerminated(p)
	if t != nil && (slices.Contains(startReasons, t.Reason) || (t.ExitCode != 0 && execFailed.MatchString(strings.TrimSpace(t.Message)))) {
		return t
	}
	return nil
}

// platformFailure reports a pod that failed because of the platform: evicted, its node
// lost or shut down, disrupted.
func platformFailure(p *corev1.Pod) (string, bool) {
	if p == nil {
		return "", false
	}
	if p.Status.Phase == corev1.PodFailed && slices.Contains(platformPodReasons, p.Status.Reason) {
		return p.Status.Reason, true
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return c.Reason, true
		}
	}
	return "", false
}

// terminationStatus reads vdk-core's termination message of the pod's main container.
func terminationStatus(p *corev1.Pod) (job.ExecutionStatus, string, bool) {
	t := mainTerminated(p)
	if t == nil || strings.TrimSpace(t.Message) == "" || startFailed(p) != nil {
		return "", "", false // a start failure's message is the runtime's, not vdk-core's
	}
	var msg vdkTermination
	text := strings.TrimSpace(t.Message)
	if json.Unmarshal([]byte(text), &msg) == nil && msg.Status != "" {
		text = msg.Status
	}
	status, ok := vdkStatuses[strings.ToLower(strings.TrimSpace(text))]
	if !ok && msg.Status == "" && t.ExitCode != 0 {
		// Not vdk-core's: the end of the log the kubelet gives a failed container that wrote
		// no termination message (FallbackToLogsOnError). The exit code tells.
		return "", "", false
	}
	if !ok {
		return job.ExecPlatformError, "Unknown termination status of the data job: " + PodText(text, 200, KeepHead), true
	}
	out := text
	if msg.VDKVersion != "" {
		out += " (vdk " + msg.VDKVersion + ")"
	}
	return status, out, true
}

// LatestPod is the pod created last: the execution's current or final attempt.
func LatestPod(pods []*corev1.Pod) *corev1.Pod {
	var last *corev1.Pod
	for _, p := range pods {
		if last == nil || p.CreationTimestamp.After(last.CreationTimestamp.Time) ||
			(p.CreationTimestamp.Equal(&last.CreationTimestamp) && p.Name > last.Name) {
			last = p
		}
	}
	return last
}

// mainContainer is the job's container: the first of the pod spec (named after the job).
func mainContainer(p *corev1.Pod) *corev1.Container {
	if p == nil || len(p.Spec.Containers) == 0 {
		return nil
	}
	return &p.Spec.Containers[0]
}

func mainStatus(p *corev1.Pod) *corev1.ContainerStatus {
	c := mainContainer(p)
	if c == nil {
		return nil
	}
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == c.Name {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}

func mainTerminated(p *corev1.Pod) *corev1.ContainerStateTerminated {
	s := mainStatus(p)
	if s == nil {
		return nil
	}
	if s.State.Terminated != nil {
		return s.State.Terminated
	}
	return s.LastTerminationState.Terminated
}

func mainWaiting(p *corev1.Pod) *corev1.ContainerStateWaiting {
	if s := mainStatus(p); s != nil {
		return s.State.Waiting
	}
	return nil
}

// ran reports whether the pod's container started: it runs or ran.
func ran(p *corev1.Pod) bool {
	switch p.Status.Phase {
	case corev1.PodRunning, corev1.PodSucceeded:
		return true
	case corev1.PodFailed:
		return mainTerminated(p) != nil
	}
	return false
}
