package job

import "time"

// The read side of executions: an execution as the API and GraphQL show it, and the
// queries that page through them.

// Execution is one execution of a data job, with a snapshot of the deployment it ran.
type Execution struct {
	ID      string
	JobName string
	// Type is manual or scheduled; Status one of ExecutionStatuses.
	Type, Status       string
	Message            string
	OpID               string
	StartTime, EndTime *time.Time
	StartedBy          string
	JobVersion         string
	JobSchedule        string
	VDKVersion         string
	PythonVersion      string
	Resources          Resources // zero fields: unknown
	DeployedDate       *time.Time
	DeployedBy         string
	// Args is the JSON object of a manual start's arguments, or nil.
	Args []byte
	// ExitCode and TerminationReason are those of a final status (see ExecutionUpdate).
	ExitCode          *int32
	TerminationReason string
	// LogicalTime is the schedule time a catch-up or backfill run stands for (nil: none);
	// BackfillID its backfill (0: none); RerunOf the execution it re-runs ("": none).
	LogicalTime *time.Time
	BackfillID  int64
	RerunOf     string
}

// ExecutionField is what executions are ordered by.
type ExecutionField int

// ExecutionFilter holds the conditions an execution must meet, all of them; zero fields
// impose none, except Visible.
type ExecutionFilter struct {
	// Visible restricts the executions to jobs of the caller's teams, whatever else the
	// filter says.
	Visible                                            Visibility
	StartTimeGte, StartTimeLte, EndTimeGte, EndTimeLte *time.Time
	StatusIn, JobNameIn, TeamNameIn                    []string
}

// ExecutionsQuery asks for a page of executions.
type ExecutionsQuery struct {
	Filter ExecutionFilter
	// Order is the sort key (default ExecByStartTime, descending); the id breaks ties.
	Order ExecutionField
	Desc  bool
	// Offset and Limit page the executions (of each job, for ExecutionsOfJobs).
	Offset, Limit int
	// Count asks for the total (ignored by ExecutionsOfJobs).
	Count bool
}

// ExecutionsPage is a page of executions and, when counted, the total.
type ExecutionsPage struct {
	Rows  []Execution
	Total int // -1 when not counted
}

// ExecutionCount counts the finished executions of a job by outcome.
type ExecutionCount struct {
	Succeeded int
	// Failed counts user and platform errors.
	Failed int
}

// ExecutionStatuses are the statuses of an execution, as VDK's REST API spells them.
func ExecutionStatuses() []string {
	return []string{"submitted", "running", "succeeded", "cancelled", "skipped", "user_error", "platform_error"}
}

// The orders of the executions query (VDK's DataJobExecutionOrder properties).
const (
	ExecByStartTime ExecutionField = iota + 1
	ExecByEndTime
	ExecByID
	ExecByJobName
	ExecByTeam
	ExecByStatus
	ExecByType
	ExecByMessage
	ExecByOpID
	ExecByStartedBy
	ExecByJobVersion
	ExecByJobSchedule
	ExecByVDKVersion
	ExecByDeployedDate
	ExecByDeployedBy
)
