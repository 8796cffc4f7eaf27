package service

import (
	"context"

	"github.com/datajobs/datajobs/internal/job"
)

// MaxPageSize bounds the pages of revisions and of the audit log.
const MaxPageSize = 200

// pageSize is limit within 1..MaxPageSize; 0 asks for the default, 50.
func pageSize(limit int) (int, error) {
	switch {
	case limit == 0:
		return 50, nil
	case limit < 1 || limit > MaxPageSize:
		return 0, job.Invalid("page_size", "between 1 and 200", limit)
	}
	return limit, nil
}

// Revisions returns a page of the revisions of the job name of team, newest first, before
// the revision numbered before (0: from the newest).
func (s *Service) Revisions(ctx context.Context, team, name string, before, limit int) (job.RevisionsPage, error) {
	limit, err := pageSize(limit)
	if err != nil {
		return job.RevisionsPage{}, err
	}
	if before < 0 {
		return job.RevisionsPage{}, job.Invalid("before", "a revision number", before)
	}
	return s.store.Revisions(ctx, team, name, before, limit)
}

// RollbackDeployment deploys the spec of revision n of the job name of team: an ordinary
// change, by user, checked like any deployment (the python version must still be
// supported, the resources within today's bounds) and recorded as a revision of its own.
func (s *Service) RollbackDeployment(ctx context.Context, team, name string, n int, user string) (job.Deployment, error) {
	if err := ValidateUser(user); err != nil {
		return job.Deployment{}, err
	}
	if n < 1 {
		return job.Deployment{}, job.RevisionNotFound(name, n)
	}
	return s.store.RollbackDeployment(ctx, team, name, n, func(j job.Job, _ *job.Deployment, target job.Deployment) (job.Deployment, error) {
		c := job.DeploymentChange{PythonVersion: &target.PythonVersion}
		if err := c.Validate(s.cfg.SupportedPythonVersions, s.cfg.Resources); err != nil {
			return job.Deployment{}, err
		}
		return s.finish(j, target, user)
	})
}

// RecordAudit appends e to the audit log of its team.
func (s *Service) RecordAudit(ctx context.Context, e job.AuditEntry) error {
	return s.store.RecordAudit(ctx, e)
}

// Audit returns a page of team's audit log, newest first, of the entries before the id
// before (0: from the newest).
func (s *Service) Audit(ctx context.Context, team string, before int64, limit int) (job.AuditPage, error) {
	limit, err := pageSize(limit)
	if err != nil {
		return job.AuditPage{}, err
	}
	if before < 0 {
		return job.AuditPage{}, job.Invalid("before", "an audit entry id", before)
	}
	return s.store.Audit(ctx, team, before, limit)
}
