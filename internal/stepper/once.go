package stepper

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/datajobs/datajobs/internal/job"
)

// One pass of the stepper outside a serving leader (`datajobs sync --once`): the resync,
// then one step of every running run, under the term's fence; or, planned, what that would
// start, writing nothing.

// NodeStart is a node a pass started (planned: would start).
type NodeStart struct {
	Team, Pipeline string
	Run            int64
	Node           string
	// Execution is the execution's id (planned: the id it would have).
	Execution string
}

// ScheduledRun is a schedule time a pass started a run of (planned: would start).
type ScheduledRun struct {
	Team, Pipeline string
	LogicalTime    time.Time
}

// Report is what one pass did or would do.
type Report struct {
	// Scheduled are the schedule times that start a run (planned passes only: a pass that
	// writes logs its own and reports their nodes in Started).
	Scheduled []ScheduledRun
	// Started are the nodes started, in the order of their runs.
	Started []NodeStart
}

// Once runs the resync and one step of every running run, under fence, and reports the
// nodes it started.
func (s *Stepper) Once(ctx context.Context, fence job.Fence) (Report, error) {
	// Every running run, not only the overdue ones the resync returns: a pass is rare, and
	// each of its steps checks the fence, so that a pass without the lease is refused.
	_, err := s.resync(ctx, fence)
	errs := []error{err}
	ids, err := s.db.ActivePipelineRuns(ctx)
	if err != nil {
		errs = append(errs, fmt.Errorf("read running pipeline runs: %w", err))
	}
	var rep Report
	for _, id := range ids {
		res, err := s.step(ctx, fence, id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rep.add(id, res.Team, res.Pipeline, res.Nodes, res.Started)
	}
	return rep, errors.Join(errs...)
}

// Plan reports what Once would do now, writing nothing: the schedule times due and the
// nodes one step of each running run would start (runs a schedule or a backfill would
// start are not stepped in a plan).
func (s *Stepper) Plan(ctx context.Context) (Report, error) {
	var rep Report
	ps, err := s.db.ScheduledPipelines(ctx)
	if err != nil {
		return rep, err
	}
	now := s.cfg.Now()
	for _, p := range ps {
		times, err := job.ScheduleTimes(p.Cron, p.TimeZone, p.From, now, maxMissedTimes)
		if err != nil {
			continue
		}
		fire, _ := Due(times, now, p.CatchUp)
		for _, at := range fire {
			rep.Scheduled = append(rep.Scheduled, ScheduledRun{Team: p.Team, Pipeline: p.Name, LogicalTime: at})
		}
	}
	ids, err := s.db.ActivePipelineRuns(ctx)
	if err != nil {
		return rep, fmt.Errorf("read running pipeline runs: %w", err)
	}
	var errs []error
	for _, id := range ids {
		res, err := s.db.PlanPipelineRun(ctx, id, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("plan pipeline run %d: %w", id, err))
			continue
		}
		rep.add(id, res.Team, res.Pipeline, res.Nodes, res.Started)
	}
	return rep, errors.Join(errs...)
}

func (r *Report) add(run int64, team, pipeline string, nodes, executions []string) {
	for i, n := range nodes {
		r.Started = append(r.Started, NodeStart{Team: team, Pipeline: pipeline, Run: run, Node: n, Execution: executions[i]})
	}
}
