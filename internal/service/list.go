package service

import (
	"context"

	"github.com/datajobs/datajobs/internal/job"
)

// ListJobs reads one page of jobs as r asks (see job.ListRequest). The next runs a filter
// or sort on one needs are computed here, since the database cannot compute them: the
// store asks for each distinct schedule of the jobs the rest of the filter lets through.
func (s *Service) ListJobs(ctx context.Context, r job.ListRequest) (job.ListPage, error) {
	var nextRun func(schedule string) (int64, bool)
	if r.UsesNextRun() {
		at := r.At
		if at.IsZero() {
			at = s.cfg.Now()
		}
		nextRun = func(schedule string) (int64, bool) { return s.schedules.NextRun(schedule, at) }
	}
	return s.store.ListJobs(ctx, r, nextRun)
}

// ExecutionsPage reads a page of executions across jobs.
func (s *Service) ExecutionsPage(ctx context.Context, q job.ExecutionsQuery) (job.ExecutionsPage, error) {
	return s.store.Executions(ctx, q)
}

// Teams returns the teams that own at least one job, sorted.
func (s *Service) Teams(ctx context.Context) ([]string, error) {
	return s.store.Teams(ctx)
}

// ExecutionsOfJobs reads a page of executions of each of the jobs names, in one statement.
func (s *Service) ExecutionsOfJobs(ctx context.Context, names []string, q job.ExecutionsQuery) (map[string][]job.Execution, error) {
	return s.store.ExecutionsOfJobs(ctx, names, q)
}

// ExecutionCounts counts the finished executions of each of the jobs names by outcome.
func (s *Service) ExecutionCounts(ctx context.Context, names []string) (map[string]job.ExecutionCount, error) {
	return s.store.ExecutionCounts(ctx, names)
}
