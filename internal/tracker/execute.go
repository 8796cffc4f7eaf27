package tracker

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
)

// execute carries out an execution's plan, step by step: the Job writes through the
// fenced kube.JobApplier, the statuses through the batched, fenced writer. An error
// stops it and is retried with backoff; the result says when to look again.
func (t *execTerm) execute(ctx context.Context, p execPlan) (controller.Result, error) {
	if p.Forget {
		t.forget(p.ID) // its Job is gone: no more events about it
	}
	if p.Settled {
		t.takeSeen(p.ID)
	}
	res := controller.Result{RequeueAfter: p.RecheckAfter}
	for _, step := range p.Steps {
		var err error
		switch step {
		case execNone, execConfirmGone: // the apiserver's answer was planned (execTerm.plan)
		case execCreate:
			err = t.create(ctx, p)
		case execCancel:
			err = t.x.jobs.Delete(ctx, p.Job, metav1.DeletePropagationForeground)
		case execStop:
			err = t.x.jobs.Delete(ctx, p.Job, metav1.DeletePropagationBackground)
		case execRecordOutcome:
			err = t.record(ctx, p.Row, p.Job, p.Update)
		case execRecordLost:
			err = t.record(ctx, p.Row, nil, p.Update)
		case execCollectLogs:
			if len(p.Pods) == 0 {
				t.logLost(ctx, p.ID)
			} else {
				t.queueLog(ctx, p.ID, p.Pods)
			}
		}
		if err != nil {
			return controller.Result{}, err
		}
	}
	return res, nil
}

// record writes one status of an execution, fenced; live (may be nil) is its Job, whose
// labels and annotations describe a run not recorded yet.
func (t *execTerm) record(ctx context.Context, row *job.TrackedExecution, live *batchv1.Job, u job.ExecutionUpdate) error {
	u.ID = idOf(row, live)
	seen := t.takeSeen(u.ID)
	if row != nil {
		u.JobName, u.JobUID, u.Type, u.OpID, u.StartedBy = row.JobName, row.JobUID, row.Type, row.OpID, row.StartedBy
	} else {
		u.JobName, u.JobUID = live.Labels[kube.LabelJob], live.Labels[kube.LabelJobUID]
		u.Type = cmp.Or(live.Annotations[kube.AnnotationExecutionType], job.ExecScheduled)
		u.OpID = cmp.Or(live.Annotations[kube.AnnotationOpID], live.Name)
		u.StartedBy = cmp.Or(live.Annotations[kube.AnnotationStartedBy], "scheduled/runtime")
		if u.StartTime == nil {
			u.StartTime = &live.CreationTimestamp.Time
		}
	}
	if u.JobName == "" || u.JobUID == "" {
		return nil // not a Job of a data job datajobs rendered
	}
	wrote, err := t.write(ctx, u)
	if err != nil {
		t.forget(u.ID)
		t.enqueueSeen(u.ID, seen)
		return err
	}
	if !wrote {
		t.forget(u.ID) // the row is not what the view says (or the lease is lost): read it next time
		return nil
	}
	t.wrote(row, u)
	t.x.cfg.Metrics.recorded(u, row, seen)
	t.x.log.InfoContext(ctx, "execution_recorded", "execution", u.ID, "job", u.JobName, "status", string(u.Status))
	return nil
}

// create creates the Job of a manual start from the job's CronJob (cronjobs.go). While
// the CronJob is missing (its deployment not applied yet) it retries, until the plan says
// the start timed out: then it records the plan's platform error (execPlan.create).
func (t *execTerm) create(ctx context.Context, p execPlan) error {
	row := p.Row
	cj, err := t.cronJob(ctx, row.JobName, row.JobUID)
	if err == nil {
		err = t.x.jobs.Start(ctx, cj, kube.ManualExecution{
			ID: row.ID, OpID: row.OpID, StartedBy: row.StartedBy, Args: row.Args, Type: row.Type, LogicalTime: row.LogicalTime,
			Image: row.Image,
		})
	}
	if errors.Is(err, kube.ErrNoCronJob) {
		if p.Update.Status != "" {
			return t.record(ctx, row, nil, p.Update)
		}
		return fmt.Errorf("start execution %s: cronjob %s not there yet", row.ID, row.JobName)
	}
	if err != nil {
		return fmt.Errorf("start execution %s: %w", row.ID, err)
	}
	t.x.cfg.Metrics.started.Inc()
	t.x.log.InfoContext(ctx, "execution_job_created", "execution", row.ID, "job", row.JobName)
	// Recorded, so that a Job deleted before its pod ran is a lost execution, not started
	// again by this leader or the next.
	if _, err := t.x.db.MarkExecutionJobCreated(ctx, t.fence, row.ID); err != nil {
		return fmt.Errorf("start execution %s: %w", row.ID, err)
	}
	t.createdJob(row.ID)
	return nil
}
