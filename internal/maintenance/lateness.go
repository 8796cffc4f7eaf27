package maintenance

import (
	"cmp"
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
	// Interval is the period of the check (default LatenessIntervalDefault).
	Interval time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
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
	cfg.Interval = cmp.Or(cfg.Interval, LatenessIntervalDefault)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Lateness{cfg: cfg, db: db}
}

// Service is the service as a Maintainer runs it.
func (s *Lateness) Service() Service {
	return Service{Name: "lateness", Period: s.cfg.Interval, RunOnce: s.runOnce}
}

// runOnce records one lateness pass. A job whose schedule cannot be read is left out;
// the others are recorded.
func (s *Lateness) runOnce(ctx context.Context, fence job.Fence) (Counts, error) {
	watches, err := s.db.LatenessWatches(ctx)
	if err != nil {
		return nil, err
	}
	now := s.cfg.Now()
	var (
		late []job.LateStart
		errs []error
	)
	for _, w := range watches {
		anchor, ok, err := lateStart(w, now)
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

// lateStart returns the schedule time whose run w is late with at now: the first one after
// its last finished scheduled run (or its last deploy) with no run started. The CronJob
// controller may make a run's Job up to its starting deadline after its time (at the top
// of the hour, with thousands of jobs due, it does), and a burst's pods then queue at the
// scheduler: a run that starts within its starting deadline is never late (issue 45). A
// run without a Job is late once the delay and the deadline have both passed; a run whose
// Job was made in time is late once its pod has not started by the deadline nor the delay
// after its Job (a pod no node takes is late once both have passed).
// A running run is no late start (the store counts it as a late run).
func lateStart(w job.LatenessWatch, now time.Time) (time.Time, bool, error) {
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
	deadline := anchor.Add(max(delay, time.Duration(p.StartingDeadlineSeconds)*time.Second))
	if c := w.LastCreated; c != nil && !c.Before(anchor) { // its Job exists: its pod has the delay to start too
		deadline = maxTime(deadline, c.Add(delay))
	}
	return anchor, !now.Before(deadline), nil
}

// maxTime is the later of a and b.
func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
