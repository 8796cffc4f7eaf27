package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	batchv1ac "k8s.io/client-go/applyconfigurations/batch/v1"
	"k8s.io/client-go/kubernetes"
	typedbatchv1 "k8s.io/client-go/kubernetes/typed/batch/v1"
)

// Applier writes rendered CronJobs to one namespace. It is the only code that changes
// CronJobs; every write is made as field manager FieldManager.
type Applier struct {
	client    kubernetes.Interface
	namespace string
}

// NewApplier returns an Applier for the CronJobs of namespace.
func NewApplier(client kubernetes.Interface, namespace string) *Applier {
	return &Applier{client: client, namespace: namespace}
}

func (a *Applier) cronJobs() typedbatchv1.CronJobInterface {
	return a.client.BatchV1().CronJobs(a.namespace)
}

// Apply makes the CronJob in the cluster equal to cj, creating it if needed, and returns
// the object the apiserver stored. It uses server-side apply with force, which creates,
// updates, and takes back fields another manager changed; applying an unchanged object
// writes nothing (the resourceVersion stays). When someone added spec fields datajobs
// never renders, which apply cannot remove, it follows with a full update of the spec
// (guarded by the resourceVersion it just read). An error for which IsUserError is true
// means the spec itself is invalid.
func (a *Applier) Apply(ctx context.Context, cj *batchv1.CronJob) (*batchv1.CronJob, error) {
	ac, err := applyConfiguration(cj)
	if err != nil {
		return nil, fmt.Errorf("apply cronjob %s: %w", cj.Name, err)
	}
	live, err := a.cronJobs().Apply(ctx, ac, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	if err != nil {
		return nil, fmt.Errorf("apply cronjob %s: %w", cj.Name, err)
	}
	if drifted, _ := Drifted(live, cj); !drifted {
		return live, nil
	}
	up := live.DeepCopy()
	up.Spec = *cj.Spec.DeepCopy()
	up.Labels = merged(up.Labels, cj.Labels)
	up.Annotations = merged(up.Annotations, cj.Annotations)
	live, err = a.cronJobs().Update(ctx, up, metav1.UpdateOptions{FieldManager: FieldManager})
	if err != nil {
		return nil, fmt.Errorf("update cronjob %s: %w", cj.Name, err)
	}
	if drifted, reason := Drifted(live, cj); drifted {
		// A mutating webhook or policy keeps changing what we write; retrying would loop.
		return live, fmt.Errorf("update cronjob %s: still differs after update: %s", cj.Name, reason)
	}
	return live, nil
}

// Replace swaps live, a CronJob of an older incarnation of the job (another job UID), for
// cj: it deletes live, with a precondition on its UID so that nothing newer is deleted,
// and then creates cj. The old incarnation's Jobs go with it (Background propagation: the
// job they ran for was deleted), so the name is free at once. If the old object is still
// there (it has finalizers), Replace returns an error and is to be retried.
func (a *Applier) Replace(ctx context.Context, live, cj *batchv1.CronJob) (*batchv1.CronJob, error) {
	if err := a.delete(ctx, live.Name, live.UID, metav1.DeletePropagationBackground); err != nil {
		return nil, fmt.Errorf("replace cronjob %s: %w", live.Name, err)
	}
	got, err := a.Apply(ctx, cj)
	if err != nil {
		return nil, fmt.Errorf("replace cronjob %s: %w", live.Name, err)
	}
	if got.UID == live.UID {
		return nil, fmt.Errorf("replace cronjob %s: the old object %s is still being deleted", live.Name, live.UID)
	}
	return got, nil
}

// Delete deletes the CronJob name, if it still is the object with the given UID (an empty
// uid deletes whatever has the name). A missing CronJob counts as deleted. A UID mismatch
// returns an error for which apierrors.IsConflict is true: a newer object has the name.
//
// Propagation is Orphan: executions already running are left to finish. The garbage
// collector (kube-controller-manager) removes the CronJob's ownership of its Jobs and then
// the CronJob itself; the Jobs are cleaned up by their own ttlSecondsAfterFinished. Until
// then the CronJob is still there with a deletion timestamp, and callers that need it gone
// check again later. docs/cronjob.md compares the other policies.
func (a *Applier) Delete(ctx context.Context, name string, uid types.UID) error {
	return a.delete(ctx, name, uid, metav1.DeletePropagationOrphan)
}

func (a *Applier) delete(ctx context.Context, name string, uid types.UID, policy metav1.DeletionPropagation) error {
	opts := metav1.DeleteOptions{PropagationPolicy: &policy}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	err := a.cronJobs().Delete(ctx, name, opts)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete cronjob %s: %w", name, err)
	}
	return nil
}

// IsUserError reports whether err says the rendered spec is invalid (422 Invalid or 400
// BadRequest): the deployment is then a user_error, not retried until it changes.
// Every other error is a platform error, retried with backoff.
func IsUserError(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)
}

// applyConfiguration converts a typed CronJob into an apply configuration. Apply
// configurations omit every unset field, so only what Render set is sent and owned.
func applyConfiguration(cj *batchv1.CronJob) (*batchv1ac.CronJobApplyConfiguration, error) {
	b, err := json.Marshal(cj)
	if err != nil {
		return nil, fmt.Errorf("marshal: %w", err)
	}
	ac := &batchv1ac.CronJobApplyConfiguration{}
	if err := json.Unmarshal(b, ac); err != nil {
		return nil, fmt.Errorf("unmarshal apply configuration: %w", err)
	}
	ac.Status = nil
	ac.WithAPIVersion("batch/v1").WithKind("CronJob")
	return ac, nil
}

func merged(base, over map[string]string) map[string]string {
	out := maps.Clone(base)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, over)
	return out
}
