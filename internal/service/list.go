package service

import (
	"context"

	"github.com/datajobs/datajobs/internal/job"
)

// ListJobs reads one page of jobs as r asks (see job.ListRequest). The next runs a filter
// or sort on job.FieldNextRun needs are computed here, once per distinct schedule of the
// jobs the rest of the filter lets through, since the database cannot compute them.
func (s *Service) ListJobs(ctx context.Context, r job.ListRequest) (job.ListPage, error) {
	var nextRuns map[string]int64
	if r.UsesNextRun() {
		schedules, err := s.store.JobSchedules(ctx, r)
		if err != nil {
			return job.ListPage{}, err
		}
		at := r.At
		if at.IsZero() {
			at = s.cfg.Now()
		}
		nextRuns = make(map[string]int64, len(schedules))
		for _, sch := range schedules {
			if next, ok := s.schedules.NextRun(sch, at); ok {
				nextRuns[sch] = next
			}
		}
	}
	return s.store.ListJobs(ctx, r, nextRuns)
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
