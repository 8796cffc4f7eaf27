package synchronizer

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
)

// execute carries out a plan: the Kubernetes write first, then the database record of it,
// conditioned on the generation the plan was made for. In dry-run mode it only logs.
func (t *term) execute(ctx context.Context, p Plan) error {
	s := t.s
	log := s.log.With("job", p.Name, "action", string(p.Action), "op_id", opID())
	if p.State.Job != nil {
		log = log.With("generation", p.State.Job.Generation)
	}
	s.recordPlan(p)
	if p.Action == ActionUnchanged || p.Action == ActionHold {
		s.rememberUnchanged(p)
		s.metrics.reconciled(string(p.Action), nil)
		return nil
	}
	if s.cfg.DryRun {
		log.InfoContext(ctx, "sync_planned", "reason", p.Reason)
		s.metrics.reconciled(string(p.Action), nil)
		return nil
	}
	start := time.Now()
	var err error
	switch p.Action {
	case ActionConflict:
		err = t.conflict(ctx, p)
	case ActionDelete, ActionOrphan:
		err = t.delete(ctx, p)
	default:
		err = t.apply(ctx, p)
	}
	s.metrics.reconciled(string(p.Action), err)
	if err != nil {
		log.WarnContext(ctx, "sync_failed", "reason", p.Reason, "error", err)
		return err
	}
	log.InfoContext(ctx, "synced", "reason", p.Reason, "duration", time.Since(start))
	return nil
}

// apply makes the CronJob match the rendering and records it, or records why it could not.
func (t *term) apply(ctx context.Context, p Plan) error {
	s := t.s
	j, d := p.State.Job, p.State.Desired
	applied := p.Live
	var err error
	switch p.Action {
	case ActionCreate:
		if p.Live != nil {
			// The old CronJob is still being deleted (its finalizer): create it once it is gone.
			return errStale
		}
		// The plan saw no CronJob of this name, managed or not, in the cache: datajobs
		// never takes over what it did not create. The cache may lag behind an unmanaged
		// CronJob created in the last milliseconds; a GET here would close that window at
		// the price of a second request per create (docs/benchmarks.md).
		applied, err = s.applier.Apply(ctx, p.Rendered)
	case ActionReplace:
		applied, err = s.applier.Replace(ctx, p.Live, p.Rendered)
	case ActionRecord:
	default:
		applied, err = s.applier.Apply(ctx, p.Rendered)
	}
	if err != nil {
		status := job.StatusPlatformError
		if kube.IsUserError(err) {
			status = job.StatusUserError
		}
		if _, recErr := s.db.RecordFailure(ctx, t.fence, j.Name, j.UID, j.Generation, status, failureMessage(p, err)); recErr != nil {
			return fmt.Errorf("%s cronjob %s: %w (and recording the failure: %w)", p.Action, p.Name, err, recErr)
		}
		if status == job.StatusUserError {
			// Not retried until the desired state changes: the next NOTIFY brings it back.
			return nil
		}
		return fmt.Errorf("%s cronjob %s: %w", p.Action, p.Name, err)
	}
	if p.Action == ActionRepair {
		s.metrics.driftRepairs.Inc()
	}
	if p.Action.writesKubernetes() {
		s.metrics.observeLag(changedAt(p))
	}
	eff := s.cfg.Render.Resources.Effective(d.Resources)
	ok, err := s.db.RecordApplied(ctx, t.fence, job.ActualDeployment{
		JobName: j.Name, JobUID: j.UID, Generation: j.Generation, Team: j.Team,
		DeploymentVersionSHA: p.Hash, JobVersion: d.JobVersion, VDKVersion: d.VDKVersion,
		PythonVersion: d.PythonVersion, Schedule: d.Schedule, Resources: eff, Enabled: d.Enabled,
		DeployedBy: d.DeployedBy, DeployedDate: appliedAt(p, applied), CronJobGeneration: applied.Generation,
	})
	if err != nil {
		return err
	}
	if !ok {
		s.remember(p.Name, nil)
		return errStale
	}
	s.remember(p.Name, &verified{uid: j.UID, generation: j.Generation, resourceVersion: applied.ResourceVersion})
	return nil
}

// delete removes the CronJob (if any), confirms with the apiserver that it is gone, and
// only then forgets the actual deployment.
func (t *term) delete(ctx context.Context, p Plan) error {
	s := t.s
	if p.Live != nil {
		if err := s.applier.Delete(ctx, p.Name, p.Live.UID); err != nil {
			if apierrors.IsConflict(err) {
				return errStale // another incarnation took the name meanwhile
			}
			return fmt.Errorf("delete cronjob %s: %w", p.Name, err)
		}
		if p.Action == ActionOrphan {
			s.metrics.orphansRemoved.Inc()
		}
	}
	a := p.State.Actual
	if a == nil {
		s.remember(p.Name, nil)
		return nil
	}
	cur, err := s.client.BatchV1().CronJobs(s.cfg.Render.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("confirm cronjob %s is gone: %w", p.Name, err)
	case cur.Labels[kube.LabelJobUID] == a.JobUID && cur.DeletionTimestamp == nil:
		return fmt.Errorf("cronjob %s still exists after delete", p.Name)
	case cur.Labels[kube.LabelJobUID] == a.JobUID:
		return fmt.Errorf("cronjob %s is still being deleted", p.Name)
	}
	if _, err := s.db.DeleteActual(ctx, t.fence, p.Name, a.JobUID); err != nil {
		return err
	}
	s.remember(p.Name, nil)
	return nil
}

// failureMessage is what the user reads in the deployment's message.
func failureMessage(p Plan, err error) string {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		return fmt.Sprintf("Kubernetes refused to %s the CronJob: %s", p.Action, se.Status().Message)
	}
	return fmt.Sprintf("could not %s the CronJob: %v", p.Action, err)
}

// changedAt is when the desired change being applied was committed.
func changedAt(p Plan) time.Time {
	at := p.State.Job.UpdatedAt
	if d := p.State.Desired; d != nil && d.DeployedDate.After(at) {
		at = d.DeployedDate
	}
	return at
}

// appliedAt is the deployed date of the actual row: when the CronJob last changed.
func appliedAt(p Plan, applied *batchv1.CronJob) time.Time {
	if p.Action == ActionRecord && p.State.Actual != nil && p.State.Actual.JobUID == p.State.Job.UID {
		return p.State.Actual.DeployedDate
	}
	if p.Action == ActionRecord && applied != nil {
		return applied.CreationTimestamp.Time
	}
	return time.Now()
}

// conflict records that a CronJob datajobs does not manage holds the job's name. It is not
// retried: an informer event on that CronJob (deleted, or relabelled) brings the job back.
func (t *term) conflict(ctx context.Context, p Plan) error {
	j := p.State.Job
	msg := fmt.Sprintf("a CronJob named %s exists in namespace %s and is not managed by datajobs; it is left alone", p.Name, t.s.cfg.Render.Namespace)
	_, err := t.s.db.RecordFailure(ctx, t.fence, j.Name, j.UID, j.Generation, job.StatusPlatformError, msg)
	return err
}
