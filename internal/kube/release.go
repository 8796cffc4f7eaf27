package kube

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReleaseFieldManager is the field manager of Release's updates. It is not datajobs'
// own, so that the update leaves no ownership of datajobs behind.
const ReleaseFieldManager = "datajobs-release"

// Release stores cj, a CronJob whose datajobs labels, annotations and managedFields
// entries the caller removed, by an update guarded by its resourceVersion (an error for
// which apierrors.IsConflict is true means it changed meanwhile), as ReleaseFieldManager.
// With dryRun the apiserver validates the update and stores nothing.
func (a *Applier) Release(ctx context.Context, cj *batchv1.CronJob, dryRun bool) (*batchv1.CronJob, error) {
	opts := metav1.UpdateOptions{FieldManager: ReleaseFieldManager}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return fenced(ctx, a.w, func() (*batchv1.CronJob, error) { return a.cronJobs().Update(ctx, cj, opts) })
}
