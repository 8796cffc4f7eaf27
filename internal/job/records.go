package job

import (
	"errors"
	"io"
	"time"
)

// Records: what the store reads and writes for the layers above it (the API, GraphQL, the
// web console and the synchronizer), as domain types: no package above the store names a
// store type. Each of them declares the store methods it calls as an interface
// (service.Store, graphapi.Reader, the synchronizer's Store).

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

// SyncState is what the synchronizer reads from the database for one job name. Any part
// may be absent: a job without a deployment, an actual row whose job is gone (to delete),
// or an actual row of an older incarnation of the name (its JobUID differs from Job's).
type SyncState struct {
	Name    string
	Job     *Job
	Desired *Deployment
	Actual  *ActualDeployment
	// Build is the image build state of Desired (the store reads it with the sync state); nil without a desired deployment.
	Build *BuildState
}

// Fence is the leader term a synchronizer write is made under: the write happens only
// while that term still holds the lease, so a deposed leader writes nothing.
type Fence struct {
	Epoch int64
}

// BuildState is what the synchronizer's build stage knows of a desired deployment's image.
type BuildState struct {
	// SourceStored is true when the deployment's job version is a stored sources version:
	// then datajobs builds its image. Otherwise the image is prebuilt, <registry>/<job>:<version>.
	SourceStored bool
	// BaseImage and Image are the latest image built for the deployment's job version and
	// python version, and the base reference it was built on ("" when none was built).
	BaseImage, Image string
	// Hold, set by the synchronizer's build stage, says why the CronJob must wait (its
	// image is being built); the plan then leaves the CronJob as it is.
	Hold string
}

// ImageBuild is a finished build: a pushed image and what it was built from.
type ImageBuild struct {
	JobName, JobUID    string
	JobVersion         string
	PythonVersion      string
	BaseImage          string
	BaseDigest         string
	RequirementsSHA256 string
	Image              string
	BytesPushed        int64
}

// Sources is one stored version of a job's sources: a zip archive and who uploaded it.
type Sources struct {
	// Version is the content address of the archive's files (see service.SourcesVersion).
	Version string
	// Archive is the zip archive as it was first uploaded with this content.
	Archive []byte
	// Reason is the reason given with the latest upload of this content.
	Reason string
	// UploadedBy and UploadedAt describe the latest upload of this content.
	UploadedBy string
	UploadedAt time.Time
}

// JobState is everything the API shows about a job's deployment, read in one
// query: the job, its desired deployment (nil when there is none) and what the
// synchronizer last applied for this incarnation of the job (nil when nothing is
// deployed; an actual row of an older incarnation of the name is not this job's).
type JobState struct {
	Job     Job
	Desired *Deployment
	Actual  *ActualDeployment
}

// DeploymentUpdate computes the complete desired deployment from the job and the current
// desired deployment (nil when there is none). Returning an error rolls the write back.
type DeploymentUpdate func(j Job, cur *Deployment) (Deployment, error)

// JobUpdate computes the new state of a job from its current one. bump tells whether the
// change can affect the rendered CronJob: then the generation is bumped and the
// synchronizer notified. Returning an error rolls the update back.
type JobUpdate func(cur Job) (next Job, bump bool, err error)

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
}

// ExecutionStart builds the execution to insert from the locked job and its deployments;
// returning an error rolls the start back.
type ExecutionStart func(st JobState) (NewExecution, error)

// StoredLog is the end of the log of a finished execution, as the leader kept it.
type StoredLog struct {
	Logs      string
	Truncated bool
}

// TrackedExecution is what the leader needs of an execution row to act on it.
type TrackedExecution struct {
	ID, JobName, JobUID string
	Type                string
	Status              ExecutionStatus
	OpID, StartedBy     string
	// Args is the JSON object of a manual start's arguments, or nil.
	Args            []byte
	CancelRequested bool
	StartTime       *time.Time
	// JobCreated is set once the leader created the Kubernetes Job of a manual start.
	JobCreated bool
}

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

// ErrNoSources is returned by GetSources when the job exists but has no sources, or not
// the version asked for. The service turns it into a 404 that names what is missing.
var ErrNoSources = errors.New("no such sources")

// SourcesReader is one stored version of a job's sources, read from the database as it is
// copied (io.Copy uses its WriteTo, a chunk at a time), so a download holds a chunk, not
// the archive.
type SourcesReader struct {
	// Sources describe the version (Archive is nil).
	Sources
	// Size is the archive's size in bytes.
	Size int64
	// ArchiveReader reads the archive.
	ArchiveReader
}

// ArchiveReader reads a stored archive as it is copied.
type ArchiveReader interface {
	io.Reader
	io.WriterTo
}
