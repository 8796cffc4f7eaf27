package synchronizer

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/datajobs/datajobs/internal/kube"
)

// ensureJobServiceAccount makes the job pods' ServiceAccount at the start of a term when
// it is missing (kube.Writer.EnsureJobServiceAccount); the apiserver admits no job pod without
// it. A failure is logged and the term goes on: a cluster's chart makes it, and a Role
// without the right to create it is no reason to stop syncing CronJobs.
func (s *Synchronizer) ensureJobServiceAccount(ctx context.Context, render kube.RenderConfig) {
	if s.cfg.DryRun {
		return
	}
	created, err := s.writer.EnsureJobServiceAccount(ctx, render.JobServiceAccount, render.Installation)
	switch {
	case err != nil:
		s.log.WarnContext(ctx, "job_service_account_unavailable", "service_account", render.JobServiceAccount, "namespace", render.Namespace, "error", err,
			"detail", "job pods are not admitted until it exists: create it (the Helm chart does) or let datajobs create it")
	case created:
		s.log.InfoContext(ctx, "job_service_account_created", "service_account", render.JobServiceAccount, "namespace", render.Namespace)
	}
}

// ensureServiceAccount makes the ServiceAccount the pods of cj run as (their team's,
// docs/profiles.md) when it is missing, once per term and name, before the CronJob that
// names it is written: the apiserver admits no pod of a missing ServiceAccount, and teams
// come and go with their jobs. Like the jobs' one, a failure is logged and the write goes
// on: an operator who makes them (with their cloud identity's annotation) may withhold
// the right to create them.
func (t *term) ensureServiceAccount(ctx context.Context, cj *batchv1.CronJob) {
	if cj == nil || t.s.cfg.DryRun {
		return
	}
	name := cj.Spec.JobTemplate.Spec.Template.Spec.ServiceAccountName
	if _, done := t.accounts.LoadOrStore(name, true); done || name == "" {
		return
	}
	created, err := t.s.writer.EnsureJobServiceAccount(ctx, name, t.render.Installation)
	switch {
	case err != nil:
		if !apierrors.IsForbidden(err) {
			t.accounts.Delete(name) // the next write tries again
		}
		t.s.log.WarnContext(ctx, "job_service_account_unavailable", "service_account", name, "namespace", t.render.Namespace, "error", err,
			"detail", "the team's job pods are not admitted until it exists: create it (docs/profiles.md) or let datajobs create it")
	case created:
		t.s.log.InfoContext(ctx, "job_service_account_created", "service_account", name, "namespace", t.render.Namespace)
	}
}
