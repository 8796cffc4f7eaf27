package service

import (
	"context"
	"time"

	"github.com/datajobs/datajobs/internal/job"
)

// Bounds of a team's health page: the runs of the last HealthWindow, and at most
// HealthListLimit failing jobs and scheduled jobs checked for lateness (the page says when
// a team has more).
const (
	HealthWindow    = 24 * time.Hour
	HealthListLimit = 500
)

// TeamHealth returns the health of team now: its jobs by deployment status, the failing
// ones, its runs of the last HealthWindow by outcome, and the late ones (a schedule time
// more than the job's notification delay ago with no run started since), computed from
// what is stored (job.TeamHealth.LateJobs). The caller is already authorized for team.
func (s *Service) TeamHealth(ctx context.Context, team string) (job.TeamHealth, error) {
	now := s.cfg.Now()
	h, err := s.store.TeamHealth(ctx, team, now.Add(-HealthWindow), HealthListLimit)
	if err != nil {
		return job.TeamHealth{}, err
	}
	h.Late = h.LateJobs(now)
	return h, nil
}
