package kube

import (
	"cmp"
	"maps"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/job"
)

// Annotations of a manual execution's Job, and the label Kubernetes puts on a Job's pods.
const (
	// AnnotationOpID is the operation id of the request that started the execution.
	AnnotationOpID = "datajobs.io/op-id"
	// AnnotationStartedBy is who started it.
	AnnotationStartedBy = "datajobs.io/started-by"
	// AnnotationExecutionType is manual or scheduled (absent: scheduled, made by the
	// CronJob controller).
	AnnotationExecutionType = "datajobs.io/execution-type"
	// LabelJobName is set by the Job controller on every pod of a Job.
	LabelJobName = "batch.kubernetes.io/job-name"
	// EnvOpID carries the operation id into the job's container, as in VDK.
	EnvOpID = "VDK_OP_ID"
	// ManualTTLSeconds is how long a finished manual Job and its pod stay, as in VDK: an
	// hour to look at them with kubectl after a run started by hand (a scheduled one keeps
	// the CronJob template's 10 minutes). The execution's status and log are recorded at
	// once; the history limits of the CronJob may still remove it earlier.
	ManualTTLSeconds int32 = 3600
)

// ManualExecution is what a manual run adds to the CronJob's job template.
type ManualExecution struct {
	// ID is the execution id and the Job's name.
	ID        string
	OpID      string
	StartedBy string
	// Args is the JSON object of arguments, or nil; passed as `--arguments '<json>'`.
	Args []byte
	// Type is the execution type annotated on the Job (default job.ExecManual).
	Type string
	// LogicalTime, when set, is the schedule time a catch-up or backfill run stands for,
	// given to the job as EnvLogicalTime (RFC 3339, UTC).
	LogicalTime *time.Time
	// Image, when set, replaces the main container's image of the CronJob's template (a
	// pipeline node pinned to the image of its run's start).
	Image string
}

// EnvLogicalTime is the environment variable of a run's logical (schedule) time.
const EnvLogicalTime = "DATAJOBS_LOGICAL_TIME"

// ExecutionJob is the Job of a manual execution, made from the CronJob's job template as
// `kubectl create job --from=cronjob/<name>` does (the CronJob owns it, so it goes with
// the CronJob), with the execution's annotations, VDK_OP_ID and VDK's TTL of manual runs
// (ManualTTLSeconds). Arguments are appended
// to the main container's command as VDK does when the command ends in `vdk run`, and
// passed as container args otherwise.
func ExecutionJob(cj *batchv1.CronJob, e ManualExecution) *batchv1.Job {
	tmpl := cj.Spec.JobTemplate.DeepCopy()
	annotations := maps.Clone(tmpl.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations["cronjob.kubernetes.io/instantiate"] = "manual"
	annotations[AnnotationOpID] = e.OpID
	annotations[AnnotationStartedBy] = e.StartedBy
	annotations[AnnotationExecutionType] = cmp.Or(e.Type, job.ExecManual)
	j := &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        e.ID,
			Namespace:   cj.Namespace,
			Labels:      tmpl.Labels,
			Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "batch/v1", Kind: "CronJob", Name: cj.Name, UID: cj.UID,
				Controller: new(true), BlockOwnerDeletion: new(true),
			}},
		},
		Spec: tmpl.Spec,
	}
	j.Spec.TTLSecondsAfterFinished = new(ManualTTLSeconds)
	if cs := j.Spec.Template.Spec.Containers; len(cs) > 0 {
		c := &cs[0]
		c.Image = cmp.Or(e.Image, c.Image)
		c.Env = append(c.Env, corev1.EnvVar{Name: EnvOpID, Value: e.OpID})
		if e.LogicalTime != nil {
			c.Env = append(c.Env, corev1.EnvVar{Name: EnvLogicalTime, Value: e.LogicalTime.UTC().Format(time.RFC3339)})
		}
		if len(e.Args) > 0 {
			if n := len(c.Command); n > 0 && strings.Contains(c.Command[n-1], "vdk run") {
				c.Command[n-1] += " --arguments " + shellQuote(string(e.Args))
			} else {
				c.Args = append(c.Args, "--arguments", string(e.Args))
			}
		}
	}
	return j
}

// CronJobImage is the image of cj's main container ("" when it has none): what a run
// started from it runs.
func CronJobImage(cj *batchv1.CronJob) string {
	if cj == nil || len(cj.Spec.JobTemplate.Spec.Template.Spec.Containers) == 0 {
		return ""
	}
	return cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
