package synchronizer

import (
	"context"
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

// checkLateness records one lateness pass: the late starts of the watched jobs, and (in
// the store) the late runs and the recoveries.
func (t *execTerm) checkLateness(ctx context.Context) {
	watches, err := t.x.db.LatenessWatches(ctx)
	if err != nil {
		t.x.log.WarnContext(ctx, "lateness_check_failed", "error", err)
		return
	}
	now := t.x.cfg.Now()
	var late []job.LateStart
	for _, w := range watches {
		anchor, ok, err := lateStart(w, now)
		if err != nil {
			t.x.log.WarnContext(ctx, "lateness_check_failed", "job", w.Name, "error", err)
			continue
		}
		if ok {
			late = append(late, job.LateStart{UID: w.UID, Anchor: anchor})
		}
	}
	if err := t.x.db.RecordLateness(ctx, t.fence, now, late); err != nil {
		t.x.log.WarnContext(ctx, "lateness_check_failed", "error", err)
	}
}

// lateStart returns the schedule time whose run w is late with at now: the first one after
// its last finished scheduled run (or its last deploy), once the delay has passed it with
// no run started. A running run is no late start (the store counts it as a late run).
func lateStart(w job.LatenessWatch, now time.Time) (time.Time, bool, error) {
	if w.Running {
		return time.Time{}, false, nil
	}
	after := w.AppliedAt
	if w.LastEnd != nil && w.LastEnd.After(after) {
		after = *w.LastEnd
	}
	p := w.Policy.Effective(job.DefaultTimeoutSeconds)
	times, err := job.ScheduleTimes(w.Schedule, p.TimeZone, after, now.Add(-time.Duration(w.DelayMinutes)*time.Minute), 1)
	if err != nil || len(times) == 0 {
		return time.Time{}, false, err
	}
	return times[0], true, nil
}
