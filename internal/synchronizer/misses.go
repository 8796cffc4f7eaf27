package synchronizer

import (
	"context"
	"encoding/json"
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

// missSlack is how long past a run's starting deadline the leader waits before it calls
// the run missed: the tracker records the row of a Job the controller created at the
// deadline within it.
const missSlack = time.Minute

// maxMissedPerPass bounds the schedule times one pass looks at per job: an outage of days
// of a per-minute schedule is worked through in steps, not in one statement.
const maxMissedPerPass = 500

// checkMisses accounts for the missed runs of every watched job.
func (t *execTerm) checkMisses(ctx context.Context) {
	watches, err := t.x.db.ScheduleWatches(ctx)
	if err != nil {
		t.x.log.WarnContext(ctx, "missed_runs_check_failed", "error", err)
		return
	}
	now := t.x.cfg.Now()
	for _, w := range watches {
		if err := t.checkMissed(ctx, w, now); err != nil {
			t.x.log.WarnContext(ctx, "missed_runs_check_failed", "job", w.Name, "error", err)
		}
	}
}

func (t *execTerm) checkMissed(ctx context.Context, w job.ScheduleWatch, now time.Time) error {
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
	ids := make([]string, len(times))
	for i, at := range times {
		ids[i] = job.ScheduledRunID(w.Name, at)
	}
	exist, err := t.x.db.ExistingExecutions(ctx, ids)
	if err != nil {
		return err
	}
	var missed []time.Time
	for i, at := range times {
		if live, _ := t.live(ids[i]); !exist[ids[i]] && live == nil {
			missed = append(missed, at)
		}
	}
	late := min(p.CatchUp, len(missed))
	for _, at := range missed[:len(missed)-late] {
		m.Skipped = append(m.Skipped, skippedRun(w, at, p))
	}
	for _, at := range missed[len(missed)-late:] {
		m.CatchUp = append(m.CatchUp, catchUpRun(w, at, now))
	}
	if len(missed) > 0 {
		t.x.log.InfoContext(ctx, "missed_runs", "job", w.Name, "skipped", len(m.Skipped), "caught_up", len(m.CatchUp))
	}
	return t.x.db.RecordMissedRuns(ctx, t.fence, m)
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
	args, _ := json.Marshal(map[string]string{"logical_time": at.UTC().Format(time.RFC3339)}) // strings always marshal
	id := job.ScheduledRunID(w.Name, at)
	return job.NewExecution{
		ID: id, OpID: id, StartedBy: "catch-up", Args: args, Snapshot: w.Snapshot, Start: now,
		Type: job.ExecScheduled, LogicalTime: &at,
	}
}
