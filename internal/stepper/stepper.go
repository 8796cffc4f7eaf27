// Package stepper is the leader's pipeline controller (issue 40): a reconciler keyed by
// pipeline run id on the shared loop (controller.Run), which takes one step of a run per
// reconcile (store.StepPipelineRun: one transaction under the run's row lock, fenced by the
// lease epoch). It is woken by the NOTIFY that the transaction recording a node's
// execution's final status sends (a trigger, migration 0035), and by the API's start,
// cancel, repair and backfill. Its resync, a key of the same queue planned every
// Interval (and once the term listens), is the controller's periodic look: it fires the
// scheduled pipelines, moves the backfills on and queues the running runs that are
// overdue, those a step would change (a NOTIFY may have been lost, or a node waits for
// something no NOTIFY reports); a run whose nodes run is left to its NOTIFYs. A waiting node is a row: it holds no pod, no worker and no connection.
// All state is in the database, so a new leader goes on where the last one stopped, and
// the fence keeps a deposed one from starting anything.
package stepper

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/store"
)

// Defaults of Config.
const (
	// WorkersDefault is how many runs are stepped at once.
	WorkersDefault = 4
	// IntervalDefault is the period of the resync: scheduled pipelines fire within it of
	// their time, and a run whose NOTIFY was lost is stepped within it.
	IntervalDefault = 5 * time.Second
	// maxMissedTimes bounds the schedule times one resync reads of one pipeline.
	maxMissedTimes = 1000
)

// Config configures the stepper.
type Config struct {
	// Settings are its loop's (defaults WorkersDefault runs stepped at once, a resync
	// every IntervalDefault); the Logger receives the steps that start or end something.
	controller.Settings
	// Registerer, when set, registers the queue's metrics
	// (datajobs_pipeline_runs_queue_*, datajobs_pipeline_runs_panics_total).
	Registerer prometheus.Registerer
}

// Store is what the stepper reads and writes (store.Store implements it).
type Store interface {
	controller.Listener
	ActivePipelineRuns(ctx context.Context) ([]int64, error)
	OverduePipelineRuns(ctx context.Context) ([]int64, error)
	StepPipelineRun(ctx context.Context, fence job.Fence, id int64, now time.Time) (store.PipelineStep, error)
	PlanPipelineRun(ctx context.Context, id int64, now time.Time) (store.PipelineStep, error)
	ScheduledPipelines(ctx context.Context) ([]store.ScheduledPipeline, error)
	FireScheduledRun(ctx context.Context, fence job.Fence, id int64, at *time.Time, until time.Time) (int64, error)
	OpenPipelineBackfills(ctx context.Context) ([]int64, error)
	AdvancePipelineBackfill(ctx context.Context, fence job.Fence, id int64) ([]int64, error)
}

// Stepper steps pipeline runs on the leader. Its Run (controller.Keyed) steps them until
// ctx ends, as the leader of a term: the term's queue of run ids and its workers, the
// LISTEN that feeds it, and the resync once it listens and every Interval; on return
// every goroutine it started has stopped.
type Stepper struct {
	*controller.Keyed
	cfg Config
	db  Store
}

// New returns a stepper of db's runs.
func New(cfg Config, db Store) *Stepper {
	cfg.Settings = cfg.WithDefaults(WorkersDefault, IntervalDefault)
	s := &Stepper{cfg: cfg, db: db}
	s.Keyed = controller.NewKeyed(cfg.Settings, controller.KeyedConfig{
		Registerer: cfg.Registerer, Channel: store.PipelineRunsChannel, Name: "pipeline_runs", Subject: "pipeline_step", Items: "Pipeline run ids",
		KeyName: "pipeline_run", KeyOf: keyOf,
	}, db, s.reconcile)
	return s
}

// keyOf is the queue key of a NOTIFY's payload: a run id, or the resync for anything else
// (a backfill's notification asks for its first runs).
func keyOf(payload string) string {
	if _, err := strconv.ParseInt(payload, 10, 64); err == nil {
		return payload
	}
	return controller.ResyncKey
}

// reconcile handles one key of term t: a step of the run it names, or the resync, which queues
// the overdue runs.
func (s *Stepper) reconcile(ctx context.Context, t controller.Term, key string) (controller.Result, error) {
	fence := job.Fence{Epoch: t.Epoch}
	if key == controller.ResyncKey {
		ids, err := s.resync(ctx, fence)
		for _, id := range ids {
			t.Queue.Add(strconv.FormatInt(id, 10))
		}
		return controller.Result{}, err
	}
	id, err := strconv.ParseInt(key, 10, 64)
	if err != nil {
		return controller.Result{Terminal: true}, nil
	}
	_, err = s.step(ctx, fence, id)
	return controller.Result{}, err
}

// step takes one step of the run id.
func (s *Stepper) step(ctx context.Context, fence job.Fence, id int64) (store.PipelineStep, error) {
	res, err := s.db.StepPipelineRun(ctx, fence, id, s.cfg.Now())
	if err != nil {
		return res, fmt.Errorf("step pipeline run %d: %w", id, err)
	}
	if len(res.Started) > 0 {
		s.cfg.Logger.InfoContext(ctx, "pipeline_nodes_started", "pipeline_run", id, "executions", res.Started)
	}
	if res.Status.Final() {
		s.cfg.Logger.InfoContext(ctx, "pipeline_run_ended", "pipeline_run", id, "status", string(res.Status))
	}
	return res, nil
}

// resync fires the scheduled pipelines and moves the backfills on, and returns the
// running runs a step would change now (store.OverduePipelineRuns: a signal may have been
// lost, or a node waits for something no signal reports), those it started included.
func (s *Stepper) resync(ctx context.Context, fence job.Fence) ([]int64, error) {
	var errs []error
	_, err := s.fire(ctx, fence)
	errs = append(errs, err)
	ids, err := s.db.OpenPipelineBackfills(ctx)
	errs = append(errs, err)
	for _, id := range ids {
		if _, err := s.db.AdvancePipelineBackfill(ctx, fence, id); err != nil {
			errs = append(errs, fmt.Errorf("pipeline backfill %d: %w", id, err))
		}
	}
	overdue, err := s.db.OverduePipelineRuns(ctx)
	if err != nil {
		errs = append(errs, fmt.Errorf("read overdue pipeline runs: %w", err))
	}
	return overdue, errors.Join(errs...)
}

// fire starts the runs of the schedule times due of every scheduled pipeline (Due) and
// accounts for its schedule up to now. It returns the runs it started.
func (s *Stepper) fire(ctx context.Context, fence job.Fence) ([]int64, error) {
	ps, err := s.db.ScheduledPipelines(ctx)
	if err != nil {
		return nil, err
	}
	now := s.cfg.Now()
	var runs []int64
	var errs []error
	for _, p := range ps {
		times, err := job.ScheduleTimes(p.Cron, p.TimeZone, p.From, now, maxMissedTimes)
		if err != nil || len(times) == 0 {
			continue // nothing due (a bad cron was refused by the PUT)
		}
		fire, missed := Due(times, now, p.CatchUp)
		if missed > 0 {
			s.cfg.Logger.InfoContext(ctx, "pipeline_runs_missed", "team", p.Team, "pipeline", p.Name, "missed", missed, "caught_up", p.CatchUp)
		}
		for _, at := range fire {
			run, err := s.db.FireScheduledRun(ctx, fence, p.ID, &at, now)
			if err != nil {
				errs = append(errs, fmt.Errorf("pipeline %s/%s: %w", p.Team, p.Name, err))
				break
			}
			if run != 0 {
				runs = append(runs, run)
				s.cfg.Logger.InfoContext(ctx, "pipeline_scheduled_run", "team", p.Team, "pipeline", p.Name, "pipeline_run", run,
					"logical_time", at, "late", now.Sub(at) > StartingDeadline)
			}
		}
		if len(fire) == 0 {
			if _, err := s.db.FireScheduledRun(ctx, fence, p.ID, nil, now); err != nil {
				errs = append(errs, fmt.Errorf("pipeline %s/%s: %w", p.Team, p.Name, err))
			}
		}
	}
	return runs, errors.Join(errs...)
}

// StartingDeadline is how late a schedule time may still start as the time due, as a
// job's default starting deadline: a time older than it was missed (no leader looked).
const StartingDeadline = time.Duration(job.DefaultStartingDeadlineSeconds) * time.Second

// Due splits the schedule times not accounted for yet (oldest first) at now: of those
// within StartingDeadline, the latest starts (earlier ones are skipped, as the CronJob
// controller skips them); of those older, missed while no leader looked, the latest
// catchUp start late, as a job's catch_up starts them. It returns the times to start,
// oldest first, and how many were missed.
func Due(times []time.Time, now time.Time, catchUp int) (fire []time.Time, missed int) {
	deadline := now.Add(-StartingDeadline)
	var late, onTime []time.Time
	for _, at := range times {
		if at.Before(deadline) {
			late = append(late, at)
		} else {
			onTime = append(onTime, at)
		}
	}
	fire = append(fire, late[len(late)-min(catchUp, len(late)):]...)
	if len(onTime) > 0 {
		fire = append(fire, onTime[len(onTime)-1])
	}
	return fire, len(late)
}
