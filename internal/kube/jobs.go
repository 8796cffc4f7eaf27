package kube

import (
	"context"
	"errors"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	typedbatchv1 "k8s.io/client-go/kubernetes/typed/batch/v1"
)

// JobApplier writes the Jobs of executions in one namespace, the execution tracker's twin
// of Applier: every write is made as field manager FieldManager and is conditioned on
// what the caller saw (a create never takes over an existing object, a delete carries
// the UID of the Job it means), and before each write it asks its fence, if it has one,
// whether it may still write at all (see Fenced).
type JobApplier struct {
	client    kubernetes.Interface
	namespace string
	fence     fence
}

// NewJobApplier returns a JobApplier for the Jobs of namespace.
func NewJobApplier(client kubernetes.Interface, namespace string) *JobApplier {
	return &JobApplier{client: client, namespace: namespace}
}

// Fenced returns a copy that calls fence right before every write and writes nothing
// when it returns an error: a leader checks that its lease is still held, so that a
// deposed leader starts and stops nothing.
func (a *JobApplier) Fenced(fence func(context.Context) error) *JobApplier {
	c := *a
	c.fence = fence
	return &c
}

func (a *JobApplier) jobs() typedbatchv1.JobInterface { return a.client.BatchV1().Jobs(a.namespace) }

// ErrNoCronJob is returned by Start when the job's CronJob is missing, being deleted, or
// of another incarnation of the job: its deployment is not applied (yet).
var ErrNoCronJob = errors.New("the job's CronJob is not there")

// Start creates the Job of manual execution e from the CronJob cronJob of job incarnation
// jobUID (ExecutionJob). The CronJob is read from the apiserver, not a cache: one missing,
// being deleted or of another incarnation returns ErrNoCronJob, and nothing is created. A
// Job of that name already there (this start was made before, by this leader or the
// previous one) counts as started.
func (a *JobApplier) Start(ctx context.Context, cronJob, jobUID string, e ManualExecution) error {
	cj, err := a.client.BatchV1().CronJobs(a.namespace).Get(ctx, cronJob, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || err == nil && (cj.Labels[LabelJobUID] != jobUID || cj.DeletionTimestamp != nil) {
		return fmt.Errorf("cronjob %s: %w", cronJob, ErrNoCronJob)
	}
	if err != nil {
		return fmt.Errorf("read cronjob %s: %w", cronJob, err)
	}
	j := ExecutionJob(cj, e)
	if err := a.fence.check(ctx); err != nil {
		return fmt.Errorf("create job %s: %w", j.Name, err)
	}
	_, err = a.jobs().Create(ctx, j, metav1.CreateOptions{FieldManager: FieldManager})
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
	if err := a.fence.check(ctx); err != nil {
		return fmt.Errorf("delete job %s: %w", j.Name, err)
	}
	err := a.jobs().Delete(ctx, j.Name, metav1.DeleteOptions{
		PropagationPolicy: &policy, Preconditions: &metav1.Preconditions{UID: &j.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete job %s: %w", j.Name, err)
	}
	return nil
}

// Gone asks the apiserver (not a cache) whether the Job name is gone: a Job created a
// moment ago may not be in an informer's cache yet.
func (a *JobApplier) Gone(ctx context.Context, name string) (bool, error) {
	_, err := a.jobs().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("read job %s: %w", name, err)
	}
	return false, nil
}
