package synchronizer

import (
	"context"

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
