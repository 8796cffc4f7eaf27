package job

import "time"

// LatenessWatch is a deployed, enabled, scheduled job incarnation with execution
// notifications on and no lateness episode open, whose next run the leader expects
// (VDK's JobDelay): late when no scheduled run started DelayMinutes after a schedule time.
type LatenessWatch struct {
	Name, UID string
	Schedule  string
	Policy    RunPolicy
	// AppliedAt is when the deployment last changed (a deploy, an enable): schedule times
	// before it are not waited for.
	AppliedAt    time.Time
	DelayMinutes int
	// LastEnd is the end of the incarnation's latest finished scheduled run (not a
	// backfill's, not a skipped one), nil when none finished.
	LastEnd *time.Time
	// LastCreated is the start time recorded for the incarnation's latest scheduled run
	// whose Job was made (by the CronJob controller or catch-up; any status but skipped;
	// not a backfill's), its pod perhaps still pending; nil when none.
	LastCreated *time.Time
	// Running is set while a run of the incarnation is running: its lateness is the run's
	// own ("still running"), not a missing start.
	Running bool
}

// LateStart is a job incarnation whose run scheduled at Anchor has not started.
type LateStart struct {
	UID    string
	Anchor time.Time
}

// VDKJobGauges is what VDK's alerting gauges say of one job (taurus_datajob_info,
// taurus_datajob_notification_delay, taurus_datajob_termination_status).
type VDKJobGauges struct {
	Name, Team                   string
	EnableExecutionNotifications bool
	Contacts                     Contacts
	DelayMinutes                 int
	// LastExecutionID and LastStatus are the job's latest execution that is not skipped
	// (VDK never records a skipped one as the termination status), "" when none.
	LastExecutionID string
	LastStatus      ExecutionStatus
}
