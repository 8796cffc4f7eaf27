package job

import (
	"cmp"
	"fmt"
	"strings"
	"time"
)

// ScheduleWatch is a deployed, enabled, scheduled job incarnation whose schedule times the
// leader accounts for: each one started by the CronJob controller, started late
// (catch-up) or recorded as skipped.
type ScheduleWatch struct {
	Name, UID string
	// Schedule and Policy are the desired deployment's (the applied one has the same
	// schedule); Snapshot is the applied deployment, for the rows of missed runs.
	Schedule string
	Policy   RunPolicy
	Snapshot Deployment
	// CheckedUntil is the schedule time up to which every run is accounted for (nil: never
	// checked); AppliedAt is when the CronJob last changed (runs before it are not misses).
	CheckedUntil *time.Time
	AppliedAt    time.Time
}

// MissedRuns is what the leader records for one watch: the skipped rows, the catch-up runs
// to start, and the new CheckedUntil.
type MissedRuns struct {
	Watch   ScheduleWatch
	Skipped []ExecutionUpdate
	CatchUp []NewExecution
	Until   time.Time
}

// ScheduleTimes returns the times schedule fires in (after, until], read in time zone tz
// (empty: UTC) as the CronJob controller reads it, at most max of them (the earliest).
func ScheduleTimes(schedule, tz string, after, until time.Time, max int) ([]time.Time, error) {
	sch, err := cronParser.Parse(ZonedSchedule(schedule, tz))
	if err != nil {
		return nil, err
	}
	var out []time.Time
	for t := sch.Next(after); !t.IsZero() && !t.After(until) && len(out) < max; t = sch.Next(t) {
		out = append(out, t)
	}
	return out, nil
}

// ScheduledRunID is the name the CronJob controller gives the Job of the run scheduled at
// t (and so its execution id): the CronJob's name and t in minutes since the epoch.
func ScheduledRunID(cronJob string, t time.Time) string {
	return fmt.Sprintf("%s-%d", cronJob, t.Unix()/60)
}

// ZonedSchedule is schedule read in time zone tz (empty: UTC) as the CronJob controller
// reads it, in the form the cron parser and Schedules take: "CRON_TZ=<tz> <schedule>". An
// empty schedule stays empty (it never fires). The store builds the same string in SQL
// (the deployments' next runs of the jobs list), so the two must agree.
func ZonedSchedule(schedule, tz string) string {
	if strings.TrimSpace(schedule) == "" {
		return ""
	}
	return "CRON_TZ=" + cmp.Or(tz, DefaultTimeZone) + " " + schedule
}
