package kube

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sync/singleflight"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedbatchv1 "k8s.io/client-go/kubernetes/typed/batch/v1"
)

// JobApplier writes the Jobs of executions in its Writer's namespace (Writer.Jobs), the
// execution tracker's twin of Applier: every write is made as field manager FieldManager,
// after the Writer's fence allowed it (a deposed leader starts and stops nothing), and is
// conditioned on what the caller saw (a create never takes over an existing object, a
// delete carries the UID of the Job it means).
type JobApplier struct {
	w *Writer
	// reads shares one read of a CronJob among the starts of its job that want it at
	// once (CronJob).
	reads singleflight.Group
}

func (a *JobApplier) jobs() typedbatchv1.JobInterface {
	return a.w.client.BatchV1().Jobs(a.w.namespace)
}

// ErrNoCronJob is returned by CronJob when the job's CronJob is missing, being deleted, or
// of another incarnation of the job: its deployment is not applied (yet).
var ErrNoCronJob = errors.New("the job's CronJob is not there")

// CronJob reads the CronJob name of job incarnation jobUID from the apiserver, to start
// runs from (Start): one missing, being deleted or of another incarnation returns
// ErrNoCronJob. Reads of one CronJob wanted while a read of it is under way share that
// read (its answer is as fresh as their own would be: it left at most one round trip
// before them), so that a job started many times a second costs the apiserver about one
// read per round trip, not one per start (bench/triggers: 6,000 reads for 6,000 starts).
// The CronJob returned is shared: read-only (ExecutionJob copies what it takes).
func (a *JobApplier) CronJob(ctx context.Context, name, jobUID string) (*batchv1.CronJob, error) {
	v, err, _ := a.reads.Do(name, func() (any, error) {
		return a.w.client.BatchV1().CronJobs(a.w.namespace).Get(ctx, name, metav1.GetOptions{})
	})
	cj, _ := v.(*batchv1.CronJob)
	if apierrors.IsNotFound(err) || err == nil && (cj.Labels[LabelJobUID] != jobUID || cj.DeletionTimestamp != nil) {
		return nil, fmt.Errorf("cronjob %s: %w", name, ErrNoCronJob)
	}
	if err != nil {
		return nil, fmt.Errorf("read cronjob %s: %w", name, err)
	}
	return cj, nil
}

// Start creates the Job of manual execution e from cj, its job's CronJob as CronJob
// returned it (ExecutionJob). A Job of that name already there (this start was made
// before, by this leader or the previous one) counts as started.
func (a *JobApplier) Start(ctx context.Context, cj *batchv1.CronJob, e ManualExecution) error {
	j := ExecutionJob(cj, e)
	_, err := fenced(ctx, a.w, func() (*batchv1.Job, error) {
		return a.jobs().Create(ctx, j, metav1.CreateOptions{FieldManager: FieldManager})
	})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create job %s: %w", j.Name, err)
	}
	return nil
}

// Delete deletes j, only that object (a precondition on its UID: a Job of the same name
// created since is left alone); a Job already gone or replaced counts as deleted.
// Foreground propagation waits for the pods (a cancel is recorded once they are gone),
// Background lets the garbage collector remove them after.
func (a *JobApplier) Delete(ctx context.Context, j *batchv1.Job, policy metav1.DeletionPropagation) error {
	err := fencedErr(ctx, a.w, func() error {
		return a.jobs().Delete(ctx, j.Name, metav1.DeleteOptions{
			PropagationPolicy: &policy, Preconditions: &metav1.Preconditions{UID: &j.UID},
		})
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete job %s: %w", j.Name, err)
	}
	return nil
}

// Gone asks the apiserver (not a cache) whether the Job name is gone: a Job created a
// moment ago may not be in an informer's cache yet.
func (a *JobApplier) Gone(ctx context.Context, name string) (bool, error) {
	return gone(ctx, a.jobs().Get, "job", name, func(*batchv1.Job) bool { return false })
}
