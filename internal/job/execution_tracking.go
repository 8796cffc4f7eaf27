package job

import "time"

// The write side of executions: a manual start as the API records it, and what the
// leader tracks, records and deletes.

// NewExecution is a manual start as the service builds it from the job's deployment.
type NewExecution struct {
	// ID is the wanted id, <job>-<unix seconds>; the store takes the next free second when
	// it is taken.
	ID        string
	OpID      string
	StartedBy string
	// Args is the JSON object of arguments, or nil.
	Args []byte
	// Snapshot is the deployment the execution runs, effective resources filled in.
	Snapshot Deployment
	Start    time.Time
	// Type is ExecManual (the zero value) or, for a missed run started late, ExecScheduled.
	Type string
	// LogicalTime is the schedule time a catch-up or backfill run stands for, or nil.
	LogicalTime *time.Time
	// BackfillID is the backfill the run belongs to (0: none); RerunOf the execution a
	// re-run repeats ("" : none).
	BackfillID int64
	RerunOf    string
	// Image, when set, is the image its Job runs instead of the CronJob's: a pipeline
	// node's, pinned at its run's start.
	Image string
}

// ExecutionStart builds the execution to insert from the locked job and its deployments;
// returning an error rolls the start back.
type ExecutionStart func(st JobState) (NewExecution, error)

// StoredLog is the end of the log of a finished execution, as the leader kept it.
type StoredLog struct {
	Logs      string
	Truncated bool
	// Pending says the log is still to be read from the execution's pod (the leader
	// writes it so with the final status, then keeps the log): Logs holds nothing yet. A
	// pending log whose pod is gone was not kept.
	Pending bool
}

// TrackedExecution is what the leader needs of an execution row to act on it.
type TrackedExecution struct {
	ID, JobName, JobUID string
	Type                string
	Status              ExecutionStatus
	// Message is the row's message: while a run waits, what it waits for.
	Message         string
	OpID, StartedBy string
	// Args is the JSON object of a manual start's arguments, or nil.
	Args            []byte
	CancelRequested bool
	// CancelMessage is the message of a cancel the job's delete, deployment delete or
	// team change asked for; empty for a user's cancel.
	CancelMessage string
	StartTime     *time.Time
	// JobCreated is set once the leader created the Kubernetes Job of a manual start.
	JobCreated bool
	// LogicalTime is the schedule time of a catch-up or backfill run: the leader creates
	// its Job as it does a manual start's.
	LogicalTime *time.Time
	// Image, when set, is the image the leader creates its Job with instead of the
	// CronJob's (NewExecution.Image).
	Image string
}

// StartedByLeader reports whether the leader creates the execution's Job (a manual start,
// a catch-up or a backfill run) rather than the CronJob controller.
func (e TrackedExecution) StartedByLeader() bool { return e.Type == ExecManual || e.LogicalTime != nil }

// ExecutionUpdate is one status of an execution as the leader observed it.
type ExecutionUpdate struct {
	ID, JobName string
	// JobUID is the incarnation of the job the Kubernetes Job was made for (its label).
	JobUID string
	// Type, OpID and StartedBy are used when the row is new (a scheduled run).
	Type, OpID, StartedBy string
	Status                ExecutionStatus
	Message               string
	StartTime, EndTime    *time.Time
	// ExitCode is the main container's exit code of a final status (nil: it never
	// exited, e.g. a Job that never got a pod); TerminationReason is why it ended as
	// Kubernetes says it (DeadlineExceeded, BackoffLimitExceeded, OOMKilled, Error,
	// Completed, ...).
	ExitCode          *int32
	TerminationReason string
	// Log, with a final status, is the end of the execution's log to keep.
	Log *StoredLog
}

// Retention is how many finished executions are kept.
type Retention struct {
	// KeptPerJob is the number of final executions kept per job (newest by end time).
	KeptPerJob int
	// MaxAge removes final executions that ended longer ago.
	MaxAge time.Duration
	// Batch is the number of rows deleted per statement.
	Batch int
}
