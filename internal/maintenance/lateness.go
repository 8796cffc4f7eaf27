package maintenance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/datajobs/datajobs/internal/job"
)

// Lateness (issue 25, VDK's JobDelay; docs/notifications.md). VDK leaves it to an
// Alertmanager rule that fires while a CronJob's next schedule time lags the clock by more
// than the job's notification_delay_period_minutes. Here the leader looks, beside the
// missed-runs check, at every enabled scheduled job with execution notifications on: it
// is late when no scheduled run started (running or finished) that long after the first
// schedule time following its last finished scheduled run (or its last deploy). The store
// writes the episode and its job_late event in one statement, once per schedule time, and
// the job_recovered event when a run starts; a run still running that long after it
// started is an episode of its own, found and ended by the store.

// LatenessIntervalDefault is the period of the lateness check.
const LatenessIntervalDefault = 30 * time.Second

// LatenessConfig configures the lateness service.
type LatenessConfig struct {
	// Settings are the check's period (default LatenessIntervalDefault), clock and logger.
	Settings
	// Jobs tells a run whose Job the CronJob controller made but whose row the tracker has
	// not written yet (the tracker's cache; nil: the rows alone).
	Jobs JobCache
}

// latenessStore is what the lateness service reads and writes.
type latenessStore interface {
	LatenessWatches(ctx context.Context) ([]job.LatenessWatch, error)
	RecordLateness(ctx context.Context, fence job.Fence, now time.Time, starts []job.LateStart) error
}

// Lateness records the late starts of the watched jobs, and (in the store) the late runs
// and the recoveries.
type Lateness struct {
	cfg LatenessConfig
	db  latenessStore
}

// NewLateness returns the lateness service.
func NewLateness(cfg LatenessConfig, db latenessStore) *Lateness {
	cfg.Settings = cfg.withDefaults(LatenessIntervalDefault)
	return &Lateness{cfg: cfg, db: db}
}

// Service is the service as a Maintainer runs it.
func (s *Lateness) Service() Service {
	return Service{Name: "lateness", Period: s.cfg.Interval, RunOnce: s.runOnce}
}

// runOnce records one lateness pass. A job whose schedule cannot be read is left out;
// the others are recorded.
func (s *Lateness) runOnce(ctx context.Context, fence job.Fence) (Counts, error) {
	// The clock is read before the rows: a run that started between the two was started
	// as of now too, so what the rows say not started was not started by now (taken after,
	// a run that started meanwhile was judged by a later clock).
	now := s.cfg.Now()
	watches, err := s.db.LatenessWatches(ctx)
	if err != nil {
		return nil, err
	}
	var (
		late []job.LateStart
		errs []error
	)
	for _, w := range watches {
		anchor, ok, err := s.lateStart(w, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("job %s: %w", w.Name, err))
			continue
		}
		if ok {
			late = append(late, job.LateStart{UID: w.UID, Anchor: anchor})
		}
	}
	if err := s.db.RecordLateness(ctx, fence, now, late); err != nil {
		return nil, errors.Join(append(errs, err)...)
	}
	return Counts{"late_starts": len(late)}, errors.Join(errs...)
}

// lateStart returns the schedule time w's job is late from, if it is late at now: past
// the delay and the starting deadline after the first schedule time since its last
// finished scheduled run (or its deploy), with no run of that time started. A run started
// when its Job was made (its row has a start time from the schedule time on, or the
// tracker's cache holds its Job before the row is written): the controller makes a Job
// only within the starting deadline, so a run with a Job started in time, however long
// its pod then waits for a node (the tracker's message says why). Issue 45: 2,172 runs of
// 10,000 hashed over 5 minutes, their Jobs made in time and their pods slowed by the
// burst, were told late by the rule that gave a pod the delay after its Job.
func (s *Lateness) lateStart(w job.LatenessWatch, now time.Time) (time.Time, bool, error) {
	if w.Running {
		return time.Time{}, false, nil
	}
	after := w.AppliedAt
	if w.LastEnd != nil && w.LastEnd.After(after) {
		after = *w.LastEnd
	}
	p := w.Policy.Effective(job.DefaultTimeoutSeconds)
	delay := time.Duration(w.DelayMinutes) * time.Minute
	times, err := job.ScheduleTimes(w.Schedule, p.TimeZone, after, now.Add(-delay), 1)
	if err != nil || len(times) == 0 {
		return time.Time{}, false, err
	}
	anchor := times[0]
	if now.Before(anchor.Add(max(delay, time.Duration(p.StartingDeadlineSeconds)*time.Second))) {
		return anchor, false, nil
	}
	if c := w.LastCreated; c != nil && !c.Before(anchor) {
		return anchor, false, nil
	}
	if s.cfg.Jobs == nil {
		return anchor, true, nil
	}
	made, err := s.cfg.Jobs.JobExists(job.ScheduledRunID(w.Name, anchor))
	return anchor, !made, err
}
