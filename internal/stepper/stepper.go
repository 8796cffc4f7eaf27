// Package stepper is the leader's pipeline controller (issue 40): a reconciler keyed by
// pipeline run id on the shared loop (controller.Run), which takes one step of a run per
// reconcile (store.StepPipelineRun: one transaction under the run's row lock, fenced by the
// lease epoch). It is woken by the NOTIFY that the transaction recording a node's
// execution's final status sends (a trigger, migration 0035), and by the API's start,
// cancel and repair; a periodic pass queues every running run as the safety net, fires
// the scheduled pipelines and moves the backfills on. A waiting node is a row: it holds no
// pod, no worker and no connection. All state is in the database, so a new leader goes on
// where the last one stopped, and the fence keeps a deposed one from starting anything.
package stepper

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/maintenance"
	"github.com/datajobs/datajobs/internal/store"
)

// Defaults of Config.
const (
	// WorkersDefault is how many runs are stepped at once.
	WorkersDefault = 4
	// IntervalDefault is the period of the pass that needs no signal: scheduled pipelines
	// fire within it of their time, and a run whose NOTIFY was lost is stepped within it.
	IntervalDefault = 5 * time.Second
	// maxMissedTimes bounds the schedule times one pass reads of one pipeline.
	maxMissedTimes = 1000
)

// Config configures the stepper.
type Config struct {
	// Workers is how many runs are stepped at once (default WorkersDefault).
	Workers int
	// Interval is the period of the safety-net pass (default IntervalDefault).
	Interval time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger receives the steps that start or end something (default slog.Default()).
	Logger *slog.Logger
	// Registerer, when set, registers the queue's metrics
	// (datajobs_pipeline_runs_queue_*, datajobs_pipeline_runs_panics_total).
	Registerer prometheus.Registerer
}

// Store is what the stepper reads and writes (store.Store implements it).
type Store interface {
	controller.Listener
	ActivePipelineRuns(ctx context.Context) ([]int64, error)
	StepPipelineRun(ctx context.Context, fence job.Fence, id int64, now time.Time) (store.PipelineStep, error)
	ScheduledPipelines(ctx context.Context) ([]store.ScheduledPipeline, error)
	FireScheduledRun(ctx context.Context, fence job.Fence, id int64, at *time.Time, until time.Time) (int64, error)
	OpenPipelineBackfills(ctx context.Context) ([]int64, error)
	AdvancePipelineBackfill(ctx context.Context, fence job.Fence, id int64) ([]int64, error)
}

// Stepper steps pipeline runs on the leader.
type Stepper struct {
	cfg     Config
	db      Store
	metrics *controller.Metrics

	mu    sync.Mutex
	queue *controller.Queue // the term's; nil between terms
}

// New returns a stepper of db's runs.
func New(cfg Config, db Store) *Stepper {
	cfg.Workers = cmp.Or(cfg.Workers, WorkersDefault)
	cfg.Interval = cmp.Or(cfg.Interval, IntervalDefault)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	m := controller.NewMetrics("datajobs_pipeline_runs_queue", "pipeline_step", "Pipeline run ids", "datajobs_pipeline_runs_panics_total")
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(m.Collectors()...)
	}
	return &Stepper{cfg: cfg, db: db, metrics: m}
}

// Service is the stepper as the leader's Maintainer runs it, in its list of services:
// Start runs the term's queue, workers and LISTEN; each run (at the start, every
// Interval) is the safety-net pass.
func (s *Stepper) Service() maintenance.Service {
	return maintenance.Service{Name: "pipeline_stepper", Period: s.cfg.Interval, AtStart: true, Start: s.start, RunOnce: s.pass}
}

// start starts the term's queue of run ids, its workers and the LISTEN that feeds it; the
// wait it returns stops them once ctx is done.
func (s *Stepper) start(ctx context.Context, fence job.Fence) func() {
	q := controller.NewQueue(s.metrics, controller.Exponential(100*time.Millisecond, 30*time.Second), s.cfg.Logger, "pipeline_run", "pipeline_step_failed")
	s.mu.Lock()
	s.queue = q
	s.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() {
		controller.Run(ctx, q, s.cfg.Workers, func(ctx context.Context, key string) (controller.Result, error) { return s.step(ctx, fence, key) })
	})
	wg.Go(func() {
		controller.Listen(ctx, s.db, store.PipelineRunsChannel, 500*time.Millisecond, s.cfg.Logger,
			func(first bool) {
				if !first {
					s.queueActive(ctx, q) // a notification may have been lost while it reconnected
				}
			}, func(payload string) { s.notified(q, payload) })
	})
	wg.Go(func() {
		<-ctx.Done()
		q.ShutDown()
	})
	return func() {
		wg.Wait()
		s.mu.Lock()
		s.queue = nil
		s.mu.Unlock()
	}
}

// notified queues the run a NOTIFY names; a backfill's notification asks for a pass.
func (s *Stepper) notified(q *controller.Queue, payload string) {
	if _, err := strconv.ParseInt(payload, 10, 64); err == nil {
		q.Add(payload)
	}
}

// step takes one step of the run key.
func (s *Stepper) step(ctx context.Context, fence job.Fence, key string) (controller.Result, error) {
	id, err := strconv.ParseInt(key, 10, 64)
	if err != nil {
		return controller.Result{Terminal: true}, nil
	}
	res, err := s.db.StepPipelineRun(ctx, fence, id, s.cfg.Now())
	if err != nil {
		return controller.Result{}, fmt.Errorf("step pipeline run %d: %w", id, err)
	}
	if len(res.Started) > 0 {
		s.cfg.Logger.InfoContext(ctx, "pipeline_nodes_started", "pipeline_run", id, "executions", res.Started)
	}
	if res.Status.Final() {
		s.cfg.Logger.InfoContext(ctx, "pipeline_run_ended", "pipeline_run", id, "status", string(res.Status))
	}
	return controller.Result{}, nil
}

// pass fires the scheduled pipelines, moves the backfills on and queues every running
// run (a signal may have been lost).
func (s *Stepper) pass(ctx context.Context, fence job.Fence) (maintenance.Counts, error) {
	s.mu.Lock()
	q := s.queue
	s.mu.Unlock()
	counts := maintenance.Counts{"scheduled_runs": 0, "backfill_runs": 0, "queued": 0}
	var errs []error
	fired, err := s.fire(ctx, fence)
	counts["scheduled_runs"] = fired
	errs = append(errs, err)
	ids, err := s.db.OpenPipelineBackfills(ctx)
	errs = append(errs, err)
	for _, id := range ids {
		started, err := s.db.AdvancePipelineBackfill(ctx, fence, id)
		if err != nil {
			errs = append(errs, fmt.Errorf("pipeline backfill %d: %w", id, err))
		}
		counts["backfill_runs"] += len(started)
	}
	if q != nil {
		counts["queued"] = s.queueActive(ctx, q)
	}
	return counts, errors.Join(errs...)
}

// queueActive queues every running run and returns how many.
func (s *Stepper) queueActive(ctx context.Context, q *controller.Queue) int {
	ids, err := s.db.ActivePipelineRuns(ctx)
	if err != nil {
		s.cfg.Logger.WarnContext(ctx, "pipeline_runs_unread", "error", err)
		return 0
	}
	for _, id := range ids {
		q.Add(strconv.FormatInt(id, 10))
	}
	return len(ids)
}

// fire starts the run of the latest schedule time due of every scheduled pipeline (earlier
// missed ones are skipped, as a CronJob without catch-up skips them) and accounts for its
// schedule up to now. It returns how many runs it started.
func (s *Stepper) fire(ctx context.Context, fence job.Fence) (int, error) {
	ps, err := s.db.ScheduledPipelines(ctx)
	if err != nil {
		return 0, err
	}
	now := s.cfg.Now()
	n := 0
	var errs []error
	for _, p := range ps {
		times, err := job.ScheduleTimes(p.Cron, p.TimeZone, p.From, now, maxMissedTimes)
		if err != nil || len(times) == 0 {
			continue // nothing due (a bad cron was refused by the PUT)
		}
		at := times[len(times)-1]
		run, err := s.db.FireScheduledRun(ctx, fence, p.ID, &at, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("pipeline %s/%s: %w", p.Team, p.Name, err))
			continue
		}
		if run != 0 {
			n++
			s.cfg.Logger.InfoContext(ctx, "pipeline_scheduled_run", "team", p.Team, "pipeline", p.Name, "pipeline_run", run, "logical_time", at)
		}
	}
	return n, errors.Join(errs...)
}
