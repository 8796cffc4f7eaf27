package maintenance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/datajobs/datajobs/internal/job"
)

// Accounting for missed schedule times (issue 27). The CronJob controller starts at most
// the latest run it missed, and only within the starting deadline; every other missed
// time left no trace. The leader therefore looks at each schedule time once it is past the
// starting deadline (and missSlack, for the tracker to have recorded a run the controller
// did start): a time with neither an execution row nor a Job of the controller's name was
// missed. The latest catch_up of them are started late, as runs of their logical time;
// the others become executions with status skipped and the reason.

// MissedRunsIntervalDefault is the period of the check for missed schedule times.
const MissedRunsIntervalDefault = 30 * time.Second

// missSlack is how long past a run's starting deadline the leader waits before it calls
// the run missed: the tracker records the row of a Job the controller created at the
// deadline within it.
const missSlack = time.Minute

// maxMissedPerPass bounds the schedule times one pass looks at per job: an outage of days
// of a per-minute schedule is worked through in steps, not in one statement.
const maxMissedPerPass = 500

// JobCache says whether a Job of a name exists in this term's cache of the cluster's Jobs
// (the execution tracker's).
type JobCache interface {
	JobExists(name string) (bool, error)
}

// MissedRunsConfig configures the missed-runs service.
type MissedRunsConfig struct {
	// Settings are the check's period (default MissedRunsIntervalDefault), clock and
	// logger, which receives a line per job with missed runs.
	Settings
	// Jobs tells a run the CronJob controller started but the tracker has not recorded
	// yet (required).
	Jobs JobCache
}

// missesStore is what the missed-runs service reads and writes.
type missesStore interface {
	ScheduleWatches(ctx context.Context) ([]job.ScheduleWatch, error)
	ExistingExecutions(ctx context.Context, ids []string) (map[string]bool, error)
	RecordMissedRuns(ctx context.Context, fence job.Fence, m job.MissedRuns) error
}

// MissedRuns accounts for the missed schedule times of every watched job.
type MissedRuns struct {
	cfg MissedRunsConfig
	db  missesStore
}

// NewMissedRuns returns the missed-runs service.
func NewMissedRuns(cfg MissedRunsConfig, db missesStore) *MissedRuns {
	cfg.Settings = cfg.withDefaults(MissedRunsIntervalDefault)
	return &MissedRuns{cfg: cfg, db: db}
}

// Service is the service as a Maintainer runs it.
func (s *MissedRuns) Service() Service {
	return Service{Name: "missed_runs", Period: s.cfg.Interval, RunOnce: s.runOnce}
}

// runOnce accounts for the missed runs of every watched job; a job that fails is tried
// again at the next run, the others are done.
func (s *MissedRuns) runOnce(ctx context.Context, fence job.Fence) (Counts, error) {
	watches, err := s.db.ScheduleWatches(ctx)
	if err != nil {
		return nil, err
	}
	now := s.cfg.Now()
	counts := Counts{"skipped": 0, "caught_up": 0}
	var errs []error
	for _, w := range watches {
		if err := s.checkMissed(ctx, fence, w, now, counts); err != nil {
			errs = append(errs, fmt.Errorf("job %s: %w", w.Name, err))
		}
	}
	return counts, errors.Join(errs...)
}

func (s *MissedRuns) checkMissed(ctx context.Context, fence job.Fence, w job.ScheduleWatch, now time.Time, counts Counts) error {
	p := w.Policy.Effective(job.DefaultTimeoutSeconds)
	horizon := now.Add(-time.Duration(p.StartingDeadlineSeconds)*time.Second - missSlack)
	from := w.AppliedAt
	if w.CheckedUntil != nil && w.CheckedUntil.After(from) {
		from = *w.CheckedUntil
	}
	if !horizon.After(from) {
		return nil
	}
	times, err := job.ScheduleTimes(w.Schedule, p.TimeZone, from, horizon, maxMissedPerPass)
	if err != nil {
		return err
	}
	m := job.MissedRuns{Watch: w, Until: horizon}
	if len(times) == maxMissedPerPass {
		m.Until = times[len(times)-1]
	}
	missed, err := s.missed(ctx, w.Name, times)
	if err != nil {
		return err
	}
	late := min(p.CatchUp, len(missed))
	for _, at := range missed[:len(missed)-late] {
		m.Skipped = append(m.Skipped, skippedRun(w, at, p))
	}
	for _, at := range missed[len(missed)-late:] {
		m.CatchUp = append(m.CatchUp, catchUpRun(w, at, now))
	}
	if err := s.db.RecordMissedRuns(ctx, fence, m); err != nil {
		return err
	}
	if len(missed) > 0 {
		s.cfg.Logger.InfoContext(ctx, "missed_runs", "job", w.Name, "skipped", len(m.Skipped), "caught_up", len(m.CatchUp))
	}
	counts["skipped"] += len(m.Skipped)
	counts["caught_up"] += len(m.CatchUp)
	return nil
}

// missed returns the schedule times of job name with neither an execution row nor a Job.
func (s *MissedRuns) missed(ctx context.Context, name string, times []time.Time) ([]time.Time, error) {
	ids := make([]string, len(times))
	for i, at := range times {
		ids[i] = job.ScheduledRunID(name, at)
	}
	exist, err := s.db.ExistingExecutions(ctx, ids)
	if err != nil {
		return nil, err
	}
	var missed []time.Time
	for i, at := range times {
		if exist[ids[i]] {
			continue
		}
		live, err := s.cfg.Jobs.JobExists(ids[i])
		if err != nil {
			return nil, err
		}
		if !live {
			missed = append(missed, at)
		}
	}
	return missed, nil
}

// skippedRun is the execution row of a run missed at at.
func skippedRun(w job.ScheduleWatch, at time.Time, p job.RunPolicy) job.ExecutionUpdate {
	return job.ExecutionUpdate{
		ID: job.ScheduledRunID(w.Name, at), JobName: w.Name, JobUID: w.UID, Type: job.ExecScheduled,
		OpID: job.ScheduledRunID(w.Name, at), StartedBy: "scheduler", Status: job.ExecSkipped,
		StartTime: &at, EndTime: &at,
		Message: fmt.Sprintf("The run scheduled at %s (%s) was not started: the CronJob controller did not start it within "+
			"its starting deadline of %d s (the controller or the cluster was down, the job was suspended, or the previous "+
			"run was still running under concurrency policy %s), and catch_up (%d) did not start it late.",
			at.UTC().Format(time.RFC3339), p.TimeZone, p.StartingDeadlineSeconds, p.ConcurrencyPolicy, p.CatchUp),
	}
}

// catchUpRun is a missed run of at started late, with its logical time as an argument.
func catchUpRun(w job.ScheduleWatch, at, now time.Time) job.NewExecution {
	args, _ := job.RunArgs("catch-up arguments", at) // no parts to parse: it cannot fail
	id := job.ScheduledRunID(w.Name, at)
	return job.NewExecution{
		ID: id, OpID: id, StartedBy: "catch-up", Args: args, Snapshot: w.Snapshot, Start: now,
		Type: job.ExecScheduled, LogicalTime: &at,
	}
}
