package service

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/datajobs/datajobs/internal/job"
)

// BackfillRequest asks for one run per schedule time of a job's deployment in [From, To].
type BackfillRequest struct {
	// From and To are RFC 3339 times, both included.
	From, To string
	// MaxParallel is how many of its runs may be under way at once (1 to
	// job.MaxBackfillParallel; 0: 1).
	MaxParallel int
	// Args is the raw JSON of the arguments every run gets besides logical_time, or empty.
	Args json.RawMessage
}

// CreateBackfill records a backfill of the job name of team: its schedule times in the
// range, read in the run policy's time zone as the CronJob controller reads them, at most
// job.MaxBackfillRuns. The leader starts the runs. The job needs a scheduled deployment.
func (s *Service) CreateBackfill(ctx context.Context, team, name string, req BackfillRequest, caller string) (job.Backfill, error) {
	// Checked under the job's lock, after the job was found: a job that is not there is a
	// 404 whatever the body.
	return s.store.CreateBackfill(ctx, team, name, func(st job.JobState) (job.NewBackfill, error) {
		n, err := backfillInput(req)
		if err != nil {
			return n, err
		}
		d := st.Desired
		if d == nil {
			return job.NewBackfill{}, job.DeploymentNotFound(name)
		}
		if d.Schedule == "" {
			return job.NewBackfill{}, notScheduled(name)
		}
		tz := d.Policy.Effective(job.DefaultTimeoutSeconds).TimeZone
		if n.Times, err = backfillTimes(d.Schedule, tz, n.From, n.To); err != nil {
			return job.NewBackfill{}, err
		}
		switch {
		case len(n.Times) == 0:
			return job.NewBackfill{}, job.Invalid("from and to", fmt.Sprintf("a range holding at least one time of the schedule %q (time zone %s)", d.Schedule, tz),
				n.From.Format(time.RFC3339)+" to "+n.To.Format(time.RFC3339)+", which holds none")
		case len(n.Times) > job.MaxBackfillRuns:
			return job.NewBackfill{}, job.Invalid("from and to", fmt.Sprintf("a range of at most %d schedule times", job.MaxBackfillRuns),
				fmt.Sprintf("a range of more than %d times of the schedule %q", job.MaxBackfillRuns, d.Schedule))
		}
		n.CreatedBy = caller
		return n, nil
	})
}

// backfillInput checks a backfill request's own fields: the range, max_parallel and the
// arguments (which may not set logical_time: each run gets its own).
func backfillInput(req BackfillRequest) (job.NewBackfill, error) {
	from, to, err := backfillRange(req.From, req.To)
	if err != nil {
		return job.NewBackfill{}, err
	}
	parallel, err := backfillParallel("max_parallel", req.MaxParallel)
	if err != nil {
		return job.NewBackfill{}, err
	}
	args, err := job.ValidateArgs(req.Args)
	if err != nil {
		return job.NewBackfill{}, err
	}
	if args != nil {
		var m map[string]any
		if json.Unmarshal(args, &m) == nil && m["logical_time"] != nil {
			return job.NewBackfill{}, job.Invalid("args", "without logical_time (each run gets its own schedule time as logical_time)", string(args))
		}
	}
	return job.NewBackfill{From: from, To: to, MaxParallel: parallel, Args: args}, nil
}

// backfillRange parses a backfill's from and to (of a job's or a pipeline's).
func backfillRange(fromText, toText string) (from, to time.Time, err error) {
	if from, err = parseTime("from", "2026-01-01T00:00:00Z", fromText); err != nil {
		return from, to, err
	}
	if to, err = parseTime("to", "2026-01-31T23:59:59Z", toText); err != nil {
		return from, to, err
	}
	if to.Before(from) {
		return from, to, job.Invalid("to", "at or after from ("+fromText+")", toText)
	}
	return from.UTC(), to.UTC(), nil
}

// parseTime parses the RFC 3339 time text of the parameter param; example shows the form
// in its error.
func parseTime(param, example, text string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, text)
	if err != nil {
		return t, job.Invalid(param, "an RFC 3339 time (e.g. "+example+")", fmt.Sprintf("%q", text))
	}
	return t, nil
}

// backfillParallel is how many runs of a backfill (of a job's or a pipeline's) may be under
// way at once: n, 0 meaning 1, from 1 to job.MaxBackfillParallel; param names it.
func backfillParallel(param string, n int) (int, error) {
	parallel := cmp.Or(n, 1)
	if parallel < 1 || parallel > job.MaxBackfillParallel {
		return 0, job.Invalid(param, fmt.Sprintf("from 1 to %d", job.MaxBackfillParallel), n)
	}
	return parallel, nil
}

// backfillTimes is the times of the schedule cron, in the time zone tz, from from to to
// (both included): at most job.MaxBackfillRuns+1 of them, so that the caller can tell a
// range of too many.
func backfillTimes(cron, tz string, from, to time.Time) ([]time.Time, error) {
	// ScheduleTimes is of (after, until]: from itself is one of them when it fires then.
	times, err := job.ScheduleTimes(cron, tz, from.Add(-time.Nanosecond), to, job.MaxBackfillRuns+1)
	if err != nil {
		return nil, job.Invalid("schedule_cron", "a valid cron expression", cron)
	}
	return times, nil
}

// notScheduled reports a backfill of a deployment without a schedule: it has no schedule
// times to run.
func notScheduled(name string) *job.Error {
	return job.NewError(job.KindInvalid,
		fmt.Sprintf("The data job %q cannot be backfilled.", name),
		"Its deployment has no schedule, so no schedule time lies in any range.",
		"No backfill was recorded and no run started.",
		"Deploy the job with a schedule (schedule_cron), or start single runs with POST …/executions.",
	)
}

// Backfills returns the latest backfills of the job name of team, newest first.
func (s *Service) Backfills(ctx context.Context, team, name string) ([]job.Backfill, error) {
	return s.store.Backfills(ctx, team, name)
}

// Backfill returns the backfill id of the job name of team.
func (s *Service) Backfill(ctx context.Context, team, name string, id int64) (job.Backfill, error) {
	return s.store.Backfill(ctx, team, name, id)
}

// CancelBackfill cancels the backfill id of the job name of team: its runs not started
// never start, those under way are cancelled.
func (s *Service) CancelBackfill(ctx context.Context, team, name string, id int64, caller string) (job.Backfill, error) {
	return s.store.CancelBackfill(ctx, team, name, id, caller)
}
