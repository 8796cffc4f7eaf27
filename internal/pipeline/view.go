package pipeline

import (
	"fmt"
	"time"

	"github.com/datajobs/datajobs/internal/job"
)

// Pipeline is a stored pipeline as the API shows it.
type Pipeline struct {
	Team, Name string
	Spec       Spec
	Revision   int
	// LastRun is the newest run, nil before the first.
	LastRun *RunSummary
	// CheckedUntil is the schedule time up to which the leader accounted for scheduled
	// runs; CreatedAt, when the pipeline was first stored.
	CheckedUntil *time.Time
	CreatedAt    time.Time
	// ManagedBy is the jobs-as-code file that owns the pipeline ("": none; see
	// job.CheckOwner).
	ManagedBy string
}

// RunSummary is a run without its nodes. The run types carry the API's names: its
// answers are these.
type RunSummary struct {
	ID          int64      `json:"id"`
	Status      RunStatus  `json:"status"`
	LogicalTime time.Time  `json:"logical_time"`
	StartTime   time.Time  `json:"start_time"`
	EndTime     *time.Time `json:"end_time"`
}

// Run is a pipeline run with the latest attempt of each node.
type Run struct {
	RunSummary
	PipelineName string    `json:"pipeline_name"`
	StartedBy    string    `json:"started_by"`
	Nodes        []NodeRun `json:"nodes,omitempty"`
}

// NodeRun is the latest attempt of one node of a run.
type NodeRun struct {
	Name        string     `json:"name"`
	JobName     string     `json:"job_name"`
	Team        string     `json:"team"`
	Status      NodeStatus `json:"status"`
	ExecutionID *string    `json:"execution_id"`
	Attempt     int        `json:"attempt"`
	StartTime   *time.Time `json:"start_time"`
	EndTime     *time.Time `json:"end_time"`
	Message     string     `json:"message"`
	// Image is the image its job was deployed with when the run started, which every
	// attempt of the node runs ("" : none recorded, the job's CronJob's).
	Image string `json:"image"`
}

// Page is one page of a list, as the jobs list pages (page_number from 1, page_size).
type Page[T any] struct {
	Items      []T
	TotalItems int
}

// NewRun is a run to start: its arguments (under each node's) and logical time.
type NewRun struct {
	Arguments   []byte
	LogicalTime time.Time
	StartedBy   string
}

// NewBackfill is a backfill to record: its schedule times, oldest first.
type NewBackfill struct {
	Times       []time.Time
	MaxParallel int
	Nodes       []string
	CreatedBy   string
}

// StartedBy is the started_by of the executions a run starts: pipeline/{team}/{name}/{run}.
func StartedBy(team, name string, run int64) string {
	return fmt.Sprintf("pipeline/%s/%s/%d", team, name, run)
}

// NotFound reports a pipeline that is not one of the team's.
func NotFound(team, name string) *job.Error {
	return job.NotFoundInTeam("pipeline", team, name)
}

// RunNotFound reports a run that is not one of the pipeline's.
func RunNotFound(name string, id int64) *job.Error {
	return job.NewError(job.KindNotFound,
		fmt.Sprintf("Run %d of pipeline %q was not found.", id, name),
		"The pipeline has no run of that id.",
		"The request was not processed.",
		"Check the run id (GET …/runs lists them).",
	)
}

// TooManyRuns reports a start while max_active_runs runs are active.
func TooManyRuns(name string, max int) *job.Error {
	return job.NewError(job.KindConflict,
		fmt.Sprintf("The pipeline %q cannot start another run now.", name),
		fmt.Sprintf("It has %d runs running, its max_active_runs.", max),
		"No run was started.",
		"Wait for a run to end, cancel one, or raise max_active_runs.",
	)
}

// RunState reports a cancel or repair the run's status does not allow.
func RunState(id int64, status RunStatus, what string) *job.Error {
	return job.NewError(job.KindConflict,
		fmt.Sprintf("Run %d cannot be %s.", id, what),
		fmt.Sprintf("It is %s.", status),
		"Nothing was changed.",
		"Cancel a running run; repair a failed or cancelled one.",
	)
}

// UnknownJob reports a node whose job does not exist in its team.
func UnknownJob(node, team, name string) *job.Error {
	e := job.Invalid("nodes.job_name", "a job of the node's team", fmt.Sprintf("%q of team %q in node %q, which is no job", name, team, node))
	e.Consequences = "The pipeline was not stored."
	return e
}

// NotGranted reports a node whose job belongs to a team that did not grant it.
func NotGranted(pipelineTeam, node, team, name string) *job.Error {
	return job.JobNotGranted(fmt.Sprintf("Node %q may not run the job %q of team %q.", node, name, team),
		team, name, pipelineTeam, "The pipeline was not stored.")
}

// UsedByPipeline reports a delete of a job a pipeline runs.
func UsedByPipeline(jobName, team, name string) *job.Error {
	return job.NewError(job.KindConflict,
		fmt.Sprintf("The data job %q cannot be deleted.", jobName),
		fmt.Sprintf("The pipeline %q of team %q runs it.", name, team),
		"The job was not deleted.",
		"Remove the job's node from the pipeline, or delete the pipeline, then delete the job.",
	)
}
