package job

import "time"

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
