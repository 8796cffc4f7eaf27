package service

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/datajobs/datajobs/internal/job"
	pl "github.com/datajobs/datajobs/internal/pipeline"
)

// Pipelines (issue 40; docs/pipelines.md): the API stores the graph and records runs,
// cancels, repairs and backfills; the leader's stepper starts the nodes' executions.

// The bounds of a page of pipelines or runs.
const (
	DefaultPipelinePageSize = 20
	MaxPipelinePageSize     = 100
)

// PipelineView is a pipeline with its next scheduled start.
type PipelineView struct {
	pl.Pipeline
	// NextRunTime is the next time its schedule fires, nil without a schedule or disabled.
	NextRunTime *time.Time
}

// PutPipeline creates or replaces the pipeline name of team from the PUT body raw, and
// reports whether it was created. Nothing is stored when the body breaks a rule of the
// contract, names a job that does not exist, or a job of another team not granted.
func (s *Service) PutPipeline(ctx context.Context, team, name string, raw []byte, caller, opID string) (bool, PipelineView, error) {
	spec, err := pl.Parse(team, name, raw)
	if err != nil {
		return false, PipelineView{}, err
	}
	created, err := s.store.PutPipeline(ctx, team, name, spec, caller, opID)
	if err != nil {
		return false, PipelineView{}, err
	}
	v, err := s.GetPipeline(ctx, team, name)
	return created, v, err
}

// GetPipeline reads the pipeline name of team.
func (s *Service) GetPipeline(ctx context.Context, team, name string) (PipelineView, error) {
	p, err := s.store.GetPipeline(ctx, team, name)
	if err != nil {
		return PipelineView{}, err
	}
	return s.pipelineView(p), nil
}

func (s *Service) pipelineView(p pl.Pipeline) PipelineView {
	v := PipelineView{Pipeline: p}
	if sc := p.Spec.Schedule; sc != nil && p.Spec.Enabled {
		now := s.now()
		if ts, err := job.ScheduleTimes(sc.Cron, sc.TimeZone, now, now.AddDate(5, 0, 0), 1); err == nil && len(ts) == 1 {
			v.NextRunTime = &ts[0]
		}
	}
	return v
}

// Paging checks a page request (0: the defaults): page from 1, size up to
// MaxPipelinePageSize.
func Paging(page, size int) (int, int, error) {
	page, size = cmp.Or(page, 1), cmp.Or(size, DefaultPipelinePageSize)
	if page < 1 {
		return 0, 0, job.Invalid("page_number", "at least 1", page)
	}
	if size < 1 || size > MaxPipelinePageSize {
		return 0, 0, job.Invalid("page_size", fmt.Sprintf("from 1 to %d", MaxPipelinePageSize), size)
	}
	return page, size, nil
}

// ListPipelines reads a page of team's pipelines, by name.
func (s *Service) ListPipelines(ctx context.Context, team string, page, size int) (pl.Page[PipelineView], error) {
	var out pl.Page[PipelineView]
	page, size, err := Paging(page, size)
	if err != nil {
		return out, err
	}
	ps, err := s.store.ListPipelines(ctx, team, page, size)
	if err != nil {
		return out, err
	}
	out.TotalItems = ps.TotalItems
	for _, p := range ps.Items {
		out.Items = append(out.Items, s.pipelineView(p))
	}
	return out, nil
}

// DeletePipeline deletes the pipeline name of team; its running executions are cancelled.
func (s *Service) DeletePipeline(ctx context.Context, team, name string) error {
	return s.store.DeletePipeline(ctx, team, name)
}

// GrantJob lets the pipelines of grantee run the job name of team.
func (s *Service) GrantJob(ctx context.Context, team, name, grantee, caller string) error {
	if err := job.ValidateTeam(grantee); err != nil {
		return err
	}
	return s.store.GrantJob(ctx, team, name, grantee, caller)
}

// RevokeGrant revokes the grant of the job name of team to grantee.
func (s *Service) RevokeGrant(ctx context.Context, team, name, grantee string) error {
	return s.store.RevokeGrant(ctx, team, name, grantee)
}

// RunRequest is the body of POST …/runs.
type RunRequest struct {
	// Arguments are merged under each node's (raw JSON object, or empty).
	Arguments json.RawMessage
	// LogicalTime is RFC 3339; empty means now.
	LogicalTime string
}

// StartPipelineRun starts a run of the pipeline name of team and returns its id; a 409
// while max_active_runs runs are running.
func (s *Service) StartPipelineRun(ctx context.Context, team, name string, req RunRequest, caller string) (int64, error) {
	args, err := job.ValidateArgs(req.Arguments)
	if err != nil {
		return 0, err
	}
	at := s.now()
	if req.LogicalTime != "" {
		if at, err = parseTime("logical_time", "2026-01-01T00:00:00Z", req.LogicalTime); err != nil {
			return 0, err
		}
	}
	return s.store.StartPipelineRun(ctx, team, name, pl.NewRun{Arguments: args, LogicalTime: at.UTC(), StartedBy: caller})
}

// ListPipelineRuns reads a page of the runs of the pipeline name of team, newest first.
func (s *Service) ListPipelineRuns(ctx context.Context, team, name string, page, size int) (pl.Page[pl.Run], error) {
	page, size, err := Paging(page, size)
	if err != nil {
		return pl.Page[pl.Run]{}, err
	}
	return s.store.ListPipelineRuns(ctx, team, name, page, size)
}

// GetPipelineRun reads the run id of the pipeline name of team with its nodes.
func (s *Service) GetPipelineRun(ctx context.Context, team, name string, id int64) (pl.Run, error) {
	return s.store.GetPipelineRun(ctx, team, name, id)
}

// CancelPipelineRun cancels the running run id and returns it as the cancel left it, as
// CancelBackfill does a backfill.
func (s *Service) CancelPipelineRun(ctx context.Context, team, name string, id int64) (pl.Run, error) {
	if err := s.store.CancelPipelineRun(ctx, team, name, id); err != nil {
		return pl.Run{}, err
	}
	return s.store.GetPipelineRun(ctx, team, name, id)
}

// RepairPipelineRun starts again the failed, cancelled and upstream_failed nodes of the
// failed or cancelled run id and their downstream; it returns them.
func (s *Service) RepairPipelineRun(ctx context.Context, team, name string, id int64) ([]string, error) {
	return s.store.RepairPipelineRun(ctx, team, name, id)
}

// PipelineBackfillRequest is the body of POST …/backfills.
type PipelineBackfillRequest struct {
	From, To        string
	MaxParallelRuns int
	// Nodes, when set, restricts every run to these nodes (edges among them kept).
	Nodes []string
}

// CreatePipelineBackfill records one run per time of the pipeline's schedule in the range,
// oldest first, at most MaxParallelRuns at once, bounded as job backfills are. It returns
// the backfill's id and its number of runs.
func (s *Service) CreatePipelineBackfill(ctx context.Context, team, name string, req PipelineBackfillRequest, caller string) (int64, int, error) {
	from, to, err := backfillRange(req.From, req.To)
	if err != nil {
		return 0, 0, err
	}
	parallel, err := backfillParallel("max_parallel_runs", req.MaxParallelRuns)
	if err != nil {
		return 0, 0, err
	}
	p, err := s.store.GetPipeline(ctx, team, name)
	if err != nil {
		return 0, 0, err
	}
	if _, err := p.Spec.Subset(req.Nodes); err != nil {
		return 0, 0, err
	}
	sc := p.Spec.Schedule
	if sc == nil {
		return 0, 0, job.Invalid("schedule", "set on a pipeline to backfill (its schedule times are the runs' logical times)", "absent")
	}
	times, err := backfillTimes(sc.Cron, sc.TimeZone, from, to)
	switch {
	case err != nil:
		return 0, 0, err
	case len(times) == 0:
		return 0, 0, job.Invalid("from and to", fmt.Sprintf("a range holding at least one time of the schedule %q", sc.Cron), "a range that holds none")
	case len(times) > job.MaxBackfillRuns:
		return 0, 0, job.Invalid("from and to", fmt.Sprintf("a range of at most %d schedule times", job.MaxBackfillRuns), "more")
	}
	id, err := s.store.CreatePipelineBackfill(ctx, team, name, pl.NewBackfill{Times: times, MaxParallel: parallel, Nodes: req.Nodes, CreatedBy: caller})
	return id, len(times), err
}
