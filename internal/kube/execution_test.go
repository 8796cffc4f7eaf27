package kube_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/testenv"
)

var t0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

func execJob(conds ...batchv1.JobCondition) *batchv1.Job {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "my-job-1"}}
	j.Spec.ActiveDeadlineSeconds = new(int64(600))
	j.Status.StartTime = &metav1.Time{Time: t0}
	j.Status.Conditions = conds
	return j
}

func withFailed(j *batchv1.Job, n int32) *batchv1.Job {
	j.Status.Failed = n
	return j
}

func named(p *corev1.Pod, name string) *corev1.Pod {
	p.Name = name
	return p
}

func twoCompletions(j *batchv1.Job) *batchv1.Job {
	j.Spec.Completions = new(int32(2))
	return j
}

func cond(t batchv1.JobConditionType, reason string) batchv1.JobCondition {
	return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, LastTransitionTime: metav1.Time{Time: t0.Add(time.Minute)}}
}

func pod(phase corev1.PodPhase, state corev1.ContainerState) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "my-job-1-abc", CreationTimestamp: metav1.Time{Time: t0}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "my-job", Image: "reg/my-job:v1",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1000Mi")}},
		}}},
		Status: corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{Name: "my-job", State: state}}},
	}
}

// deleting marks p's delete as begun at deleteAt with a grace period of grace seconds (its
// deletion timestamp is the end of the grace period); its container stopped at t0.
func deleting(p *corev1.Pod, deleteAt time.Time, grace int64) *corev1.Pod {
	p.DeletionTimestamp = &metav1.Time{Time: deleteAt.Add(time.Duration(grace) * time.Second)}
	p.DeletionGracePeriodSeconds = &grace
	p.Status.ContainerStatuses[0].State.Terminated.FinishedAt = metav1.Time{Time: t0}
	return p
}

func terminated(code int32, reason, msg string) corev1.ContainerState {
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, Message: msg}}
}

func TestObserveExecutionGivesTheTrueOutcome(t *testing.T) {
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	pulling := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "not found"}}
	evicted := pod(corev1.PodFailed, corev1.ContainerState{})
	evicted.Status.Reason = "Evicted"
	for _, tt := range []struct {
		name    string
		job     *batchv1.Job
		pods    []*corev1.Pod
		now     time.Time
		status  job.ExecutionStatus
		message string
	}{
		{"a Job without pods is submitted", execJob(), nil, t0, job.ExecSubmitted, ""},
		{"a pending pod is submitted", execJob(), []*corev1.Pod{pod(corev1.PodPending, corev1.ContainerState{})}, t0, job.ExecSubmitted, ""},
		{"a running pod is running", execJob(), []*corev1.Pod{pod(corev1.PodRunning, running)}, t0, job.ExecRunning, ""},
		{
			// Issue 43: a profile's node selector that no node matches left the run
			// submitted with no word of why.
			"a pod no node can take is submitted and says why", execJob(),
			[]*corev1.Pod{unschedulable(pod(corev1.PodPending, corev1.ContainerState{}))},
			t0, job.ExecSubmitted, "Waiting for a node: 0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.",
		},
		{"a complete Job succeeded", execJob(cond(batchv1.JobComplete, "")), []*corev1.Pod{pod(corev1.PodSucceeded, terminated(0, "Completed", ""))}, t0, job.ExecSucceeded, ""},
		{
			"the termination message wins over completion", execJob(cond(batchv1.JobComplete, "")),
			[]*corev1.Pod{pod(corev1.PodSucceeded, terminated(0, "Completed", `{"status": "User error", "vdk_version": "0.3.1"}`))},
			t0, job.ExecUserError, "User error (vdk 0.3.1)",
		},
		{
			"a platform error termination message", execJob(cond(batchv1.JobFailed, "BackoffLimitExceeded")),
			[]*corev1.Pod{pod(corev1.PodFailed, terminated(1, "Error", `{"status": "Platform error", "vdk_version": "0.3.1"}`))},
			t0, job.ExecPlatformError, "Platform error (vdk 0.3.1)",
		},
		{
			"a success termination message", execJob(cond(batchv1.JobComplete, "")),
			[]*corev1.Pod{pod(corev1.PodSucceeded, terminated(0, "Completed", `{"status": "Success", "vdk_version": "0.3.1"}`))},
			t0, job.ExecSucceeded, "Success (vdk 0.3.1)",
		},
		{
			"an unknown termination message is a platform error, never success", execJob(cond(batchv1.JobComplete, "")),
			[]*corev1.Pod{pod(corev1.PodSucceeded, terminated(0, "Completed", `gibberish`))},
			t0, job.ExecPlatformError, "Unknown termination status of the data job: gibberish",
		},
		{
			"a deadline is the user's error", execJob(cond(batchv1.JobFailed, "DeadlineExceeded")),
			[]*corev1.Pod{pod(corev1.PodFailed, terminated(137, "Error", ""))},
			t0, job.ExecUserError, "The execution ran longer than its time limit of 10m0s (activeDeadlineSeconds) and was stopped.",
		},
		{
			"out of memory is the user's error", execJob(cond(batchv1.JobFailed, "BackoffLimitExceeded")),
			[]*corev1.Pod{pod(corev1.PodFailed, terminated(137, "OOMKilled", ""))},
			t0, job.ExecUserError, "The execution ran out of memory: it was killed for exceeding its memory limit of 1000Mi. Lower its memory use or raise its memory limit.",
		},
		{
			"a non-zero exit without a message is the user's error", execJob(cond(batchv1.JobFailed, "BackoffLimitExceeded")),
			[]*corev1.Pod{pod(corev1.PodFailed, terminated(3, "Error", ""))},
			t0, job.ExecUserError, "The data job exited with code 3 (Error).",
		},
		{
			// Issue 48, item 5: a running execution's Job deleted by hand (not a cancel); the
			// kubelet stopped the container with SIGTERM. It was recorded as the user's error.
			"a container stopped by its pod's delete is the platform's error, not the job's", execJob(cond(batchv1.JobFailed, "JobDeleted")),
			[]*corev1.Pod{deleting(pod(corev1.PodFailed, terminated(143, "Error", "")), t0, 30)},
			t0, job.ExecPlatformError, "The Job my-job-1 or its pod was deleted while the execution ran (not by a cancel): its container was stopped with exit code 143.",
		},
		{
			// CI at 3c28424: with the base image's plugin, the run the delete's SIGTERM stopped
			// left with vdk-core's "Platform error" and exit 70, and the message said nothing
			// of the delete (TestAJobDeletedByHandWhileRunningIsAPlatformError).
			"a run the plugin ended as the platform's error once its pod's delete began says the delete stopped it", execJob(cond(batchv1.JobFailed, "JobDeleted")),
			[]*corev1.Pod{deleting(pod(corev1.PodFailed, terminated(70, "Error", `{"status": "Platform error", "vdk_version": "0.3"}`)), t0, 30)},
			t0, job.ExecPlatformError, "Platform error (vdk 0.3) The Job my-job-1 or its pod was deleted while the execution ran (not by a cancel): its container was stopped with exit code 70.",
		},
		{
			"a container that failed on its own the moment its pod's delete began is the job's own failure", execJob(cond(batchv1.JobFailed, "JobDeleted")),
			[]*corev1.Pod{deleting(pod(corev1.PodFailed, terminated(3, "Error", "")), t0, 0)},
			t0, job.ExecUserError, "The data job exited with code 3 (Error).",
		},
		{
			"a container that failed before its pod's delete began is the job's own failure", execJob(cond(batchv1.JobFailed, "JobDeleted")),
			[]*corev1.Pod{deleting(pod(corev1.PodFailed, terminated(143, "Error", "")), t0.Add(time.Minute), 30)},
			t0, job.ExecUserError, "The data job exited with code 143 (Error).",
		},
		{
			// Issue 48, item 8: the image's entrypoint could not start (a base image without
			// vdk on PATH); runc's message read as an unknown termination status.
			"an entrypoint that could not start is the platform's error naming the image", execJob(cond(batchv1.JobFailed, "BackoffLimitExceeded")),
			[]*corev1.Pod{pod(corev1.PodFailed, terminated(128, "StartError", `failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: exec: "vdk": executable file not found in $PATH`))},
			t0, job.ExecPlatformError, `The image reg/my-job:v1 could not start its entrypoint (StartError: failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: exec: "vdk": executable file not found in $PATH): its base image lacks what runs the job (vdk on PATH). The job's code never ran.`,
		},
		{
			// The dev stub's vdk is a script without /bin/sh: runc found it, could not
			// execute it, printed this (the kubelet's fallback message) and exited 1.
			"an entrypoint runc could not execute is the platform's error naming the image", execJob(cond(batchv1.JobFailed, "BackoffLimitExceeded")),
			[]*corev1.Pod{pod(corev1.PodFailed, terminated(1, "Error", "exec /usr/local/bin/vdk: no such file or directory\n"))},
			t0, job.ExecPlatformError, `The image reg/my-job:v1 could not start its entrypoint (Error: exec /usr/local/bin/vdk: no such file or directory): its base image lacks what runs the job (vdk on PATH). The job's code never ran.`,
		},
		{
			"the log's end of a failed container that wrote no termination message is not a status: its exit code tells", execJob(cond(batchv1.JobFailed, "BackoffLimitExceeded")),
			[]*corev1.Pod{pod(corev1.PodFailed, terminated(1, "Error", "Traceback (most recent call last):\nValueError: boom\n"))},
			t0, job.ExecUserError, "The data job exited with code 1 (Error).",
		},
		{
			"an entrypoint Docker could not run is the platform's error too", execJob(cond(batchv1.JobFailed, "BackoffLimitExceeded")),
			[]*corev1.Pod{pod(corev1.PodFailed, terminated(128, "ContainerCannotRun", `exec: "vdk": executable file not found in $PATH`))},
			t0, job.ExecPlatformError, `The image reg/my-job:v1 could not start its entrypoint (ContainerCannotRun: exec: "vdk": executable file not found in $PATH): its base image lacks what runs the job (vdk on PATH). The job's code never ran.`,
		},
		{
			"backoff after evictions is the platform's error", execJob(cond(batchv1.JobFailed, "BackoffLimitExceeded")),
			[]*corev1.Pod{evicted},
			t0, job.ExecPlatformError, "The execution's pod was stopped by the platform (Evicted). 0 attempt(s) failed.",
		},
		// Attack (issue 22, item 5): the job's own code writes {"status":"success"} as its
		// termination message, then is killed; the message must not turn the kill into a success.
		{
			"a deadline is not made a success by the container's message", execJob(cond(batchv1.JobFailed, "DeadlineExceeded")),
			[]*corev1.Pod{pod(corev1.PodFailed, terminated(137, "Error", `{"status": "success", "vdk_version": "0.3.1"}`))},
			t0, job.ExecUserError, "The execution ran longer than its time limit of 10m0s (activeDeadlineSeconds) and was stopped.",
		},
		{
			"an OOM kill is not made a success by the container's message", execJob(cond(batchv1.JobFailed, "BackoffLimitExceeded")),
			[]*corev1.Pod{pod(corev1.PodFailed, terminated(137, "OOMKilled", `{"status": "success"}`))},
			t0, job.ExecUserError, "The execution ran out of memory: it was killed for exceeding its memory limit of 1000Mi. Lower its memory use or raise its memory limit.",
		},
		{
			"a non-zero exit is not made a success or a skip by the container's message", execJob(cond(batchv1.JobFailed, "BackoffLimitExceeded")),
			[]*corev1.Pod{pod(corev1.PodFailed, terminated(2, "Error", `skipped`))},
			t0, job.ExecUserError, "The data job exited with code 2 (Error).",
		},
		{
			"a complete Job whose last container was OOM-killed is not a success", execJob(cond(batchv1.JobComplete, "")),
			[]*corev1.Pod{pod(corev1.PodFailed, terminated(137, "OOMKilled", `{"status": "success"}`))},
			t0, job.ExecUserError, "The execution ran out of memory: it was killed for exceeding its memory limit of 1000Mi. Lower its memory use or raise its memory limit.",
		},
		{
			"a failure the message reports as the same kind keeps both explanations", execJob(cond(batchv1.JobFailed, "BackoffLimitExceeded")),
			[]*corev1.Pod{pod(corev1.PodFailed, terminated(1, "Error", `{"status": "User error", "vdk_version": "0.3.1"}`))},
			t0, job.ExecUserError, "User error (vdk 0.3.1) The data job exited with code 1 (Error).",
		},
		// Issue 41, L1: the unknown message was cut at byte 200, inside the "é" at 199-200,
		// and PostgreSQL refused the batch of statuses the row went with.
		{
			"an unknown termination message is cut at a character, never inside one", execJob(cond(batchv1.JobComplete, "")),
			[]*corev1.Pod{pod(corev1.PodSucceeded, terminated(0, "Completed", strings.Repeat("x", 199)+"é"))},
			t0, job.ExecPlatformError, "Unknown termination status of the data job: " + strings.Repeat("x", 197) + "...",
		},
		{
			"a Latin-1 byte of the termination message is kept as U+FFFD", execJob(cond(batchv1.JobComplete, "")),
			[]*corev1.Pod{pod(corev1.PodSucceeded, terminated(0, "Completed", "caf\xe9"))},
			t0, job.ExecPlatformError, "Unknown termination status of the data job: caf\uFFFD",
		},
		{
			"a NUL of vdk-core's version is kept as U+FFFD", execJob(cond(batchv1.JobComplete, "")),
			[]*corev1.Pod{pod(corev1.PodSucceeded, terminated(0, "Completed", `{"status": "User error", "vdk_version": "0.3\u0000"}`))},
			t0, job.ExecUserError, "User error (vdk 0.3\uFFFD)",
		},
		{
			// Issue 48, item 2: the plugin's user-error code failed the Job through its
			// podFailurePolicy, at the first attempt.
			"a user error the podFailurePolicy stopped says it was not retried", execJob(cond(batchv1.JobFailed, "PodFailurePolicy")),
			[]*corev1.Pod{pod(corev1.PodFailed, terminated(65, "Error", `{"status": "User error", "vdk_version": "0.3.1"}`))},
			t0, job.ExecUserError, "User error (vdk 0.3.1) The data job exited with code 65 (Error). vdk-core blamed the job's own code, so it was not retried.",
		},
		{
			"a platform error retried until the backoff limit says how many attempts ran", withFailed(execJob(cond(batchv1.JobFailed, "BackoffLimitExceeded")), 2),
			[]*corev1.Pod{
				pod(corev1.PodFailed, terminated(70, "Error", `{"status": "Platform error", "vdk_version": "0.3.1"}`)),
				named(pod(corev1.PodFailed, terminated(70, "Error", `{"status": "Platform error", "vdk_version": "0.3.1"}`)), "my-job-1-def"),
			},
			t0, job.ExecPlatformError, "Platform error (vdk 0.3.1) It ran 2 attempts; the log keeps each.",
		},
		{"a one-completion Job's succeeded pod succeeded before the Job controller says so", execJob(), []*corev1.Pod{pod(corev1.PodSucceeded, terminated(0, "Completed", ""))}, t0, job.ExecSucceeded, ""},
		{
			"the termination message of a succeeded pod wins before completion too", execJob(),
			[]*corev1.Pod{pod(corev1.PodSucceeded, terminated(0, "Completed", `{"status": "User error", "vdk_version": "0.3.1"}`))},
			t0, job.ExecUserError, "User error (vdk 0.3.1)",
		},
		{"a Job of two completions waits for the Job controller", twoCompletions(execJob()), []*corev1.Pod{pod(corev1.PodSucceeded, terminated(0, "Completed", ""))}, t0, job.ExecRunning, ""},
		{"a failed pod is not final while the Job may retry", execJob(), []*corev1.Pod{pod(corev1.PodFailed, terminated(3, "Error", ""))}, t0, job.ExecRunning, ""},
		{"an image pull failure within the grace is still submitted", execJob(), []*corev1.Pod{pod(corev1.PodPending, pulling)}, t0.Add(time.Minute), job.ExecSubmitted, ""},
		{
			"an image pull failure past the grace is the platform's error", execJob(),
			[]*corev1.Pod{pod(corev1.PodPending, pulling)},
			t0.Add(5 * time.Minute),
			job.ExecPlatformError, "The image reg/my-job:v1 could not be pulled for 5m0s (ImagePullBackOff: not found). The execution was stopped.",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := kube.ObserveExecution(tt.job, tt.pods, tt.now, 5*time.Minute)
			require.Equal(t, tt.status, o.Status)
			require.Equal(t, tt.message, o.Message)
			require.Equal(t, tt.status.Final(), o.End != nil, "a final status has an end time")

			// The tracker observes what its informer cache keeps (kube.Trim): the outcome
			// must not change because the cache dropped a field ObserveExecution reads.
			trimmed := kube.ObserveExecution(trim(t, tt.job), trimAll(t, tt.pods), tt.now, 5*time.Minute)
			require.Equal(t, o.Status, trimmed.Status)
			require.Equal(t, o.Message, trimmed.Message)
			require.Equal(t, o.End, trimmed.End)
			require.Equal(t, o.Abandon, trimmed.Abandon)
			require.Equal(t, o.RecheckAfter, trimmed.RecheckAfter)
		})
	}
}

// unschedulable is p as the scheduler leaves a pod that no node can take.
func unschedulable(p *corev1.Pod) *corev1.Pod {
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.",
	})
	return p
}

// trim returns what an informer cache with kube.Trim keeps of a copy of obj.
func trim[T interface{ DeepCopyObject() runtime.Object }](t *testing.T, obj T) T {
	t.Helper()
	out, err := kube.Trim(obj.DeepCopyObject())
	require.NoError(t, err)
	return out.(T)
}

func trimAll(t *testing.T, pods []*corev1.Pod) []*corev1.Pod {
	out := make([]*corev1.Pod, len(pods))
	for i, p := range pods {
		out[i] = trim(t, p)
	}
	return out
}

func TestObserveExecutionAsksToRecheckWhenTheImageGraceEnds(t *testing.T) {
	pulling := pod(corev1.PodPending, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull"}})
	o := kube.ObserveExecution(execJob(), []*corev1.Pod{pulling}, t0.Add(time.Minute), 5*time.Minute)
	require.Equal(t, 4*time.Minute, o.RecheckAfter)
	require.False(t, o.Abandon)
}

func TestExecutionJobIsTheCronJobTemplateWithTheRunsAnnotationsAndArgs(t *testing.T) {
	cj, _ := kube.Render(job.Job{Name: "my-job", UID: "u-1", Team: "team-a"}, job.Deployment{JobVersion: "v1", PythonVersion: "3.11", Enabled: true}, kube.RenderConfig{Namespace: "ns"})
	cj.UID = "cj-uid"
	j := kube.ExecutionJob(cj, kube.ManualExecution{ID: "my-job-1700000000", OpID: "op-1", StartedBy: "alice", Args: []byte(`{"day":"it's"}`)})
	require.Equal(t, "my-job-1700000000", j.Name)
	require.Equal(t, "ns", j.Namespace)
	require.Equal(t, cj.Spec.JobTemplate.Labels, j.Labels)
	require.Equal(t, "op-1", j.Annotations[kube.AnnotationOpID])
	require.Equal(t, "alice", j.Annotations[kube.AnnotationStartedBy])
	require.Equal(t, "manual", j.Annotations[kube.AnnotationExecutionType])
	require.Equal(t, "cj-uid", string(j.OwnerReferences[0].UID))
	require.Equal(t, int32(3600), *j.Spec.TTLSecondsAfterFinished, "VDK keeps a manual run an hour")
	require.Equal(t, int32(600), *cj.Spec.JobTemplate.Spec.TTLSecondsAfterFinished, "a scheduled run keeps the template's")
	c := j.Spec.Template.Spec.Containers[0]
	require.Equal(t, []string{"--arguments", `{"day":"it's"}`}, c.Args)
	require.Contains(t, c.Env, corev1.EnvVar{Name: kube.EnvOpID, Value: "op-1"})
	require.Empty(t, cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Args, "the CronJob is not changed")

	// With VDK's command, the args go on the command line, quoted for the shell.
	cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Command = []string{"/bin/bash", "-c", "/vdk/vdk run ./my-job"}
	j = kube.ExecutionJob(cj, kube.ManualExecution{ID: "x", Args: []byte(`{"day":"it's"}`)})
	require.Equal(t, `/vdk/vdk run ./my-job --arguments '{"day":"it'\''s"}'`, j.Spec.Template.Spec.Containers[0].Command[2])
}

func TestLogReaderAnswersAtOnceForAPodThatHasNotStarted(t *testing.T) {
	t.Parallel()
	client, ns := testenv.Clientset(t), testenv.Namespace(t)
	p := pod(corev1.PodPending, corev1.ContainerState{})
	p.Namespace, p.Labels = ns, map[string]string{kube.LabelJobName: "my-job-1"}
	p.Spec.NodeSelector = map[string]string{"datajobs.test/hold": "true"} // never scheduled
	_, err := client.CoreV1().Pods(ns).Create(t.Context(), p, metav1.CreateOptions{})
	require.NoError(t, err)

	r := kube.NewLogReader(client, ns, kube.LogConfig{})
	logs, found, err := r.ExecutionLog(t.Context(), "my-job-1", 10)
	require.NoError(t, err)
	require.True(t, found)
	require.Empty(t, logs, "nothing printed yet, and the read does not wait for the pod")
	_, found, err = r.ExecutionLog(t.Context(), "no-such-execution", 0)
	require.NoError(t, err)
	require.False(t, found, "a Job without pods has no log, not an empty one")
}
