// Package job holds the domain of datajobs: data jobs, their deployments and the rules
// that every input must pass before it is stored. It knows nothing about HTTP handlers,
// SQL or Kubernetes clients (an error kind only names the HTTP status it is answered
// with); the layers above translate to and from these types.
//
// The store reads and writes these types for the layers above it (the API, GraphQL, the
// web console and the synchronizer): no package above the store names a store type. Each
// of them declares the store methods it calls as an interface (service.Store,
// graphapi.Reader, the synchronizer's Store). By topic: jobstate.go (a job with its
// deployments, the updates of the API's writes), execution_reads.go and
// execution_tracking.go, sources.go, syncstate.go.
package job

import (
	"cmp"
	"slices"
	"time"
)

// Job is a data job: its identity and the configuration that is not part of a deployment.
type Job struct {
	// Name is the primary key and the CronJob name.
	Name string
	// UID identifies this incarnation of the name; a job deleted and re-created under the
	// same name gets a new UID, so a stale CronJob can be told apart from the new one.
	UID string
	// Team owns the job; it goes into a Kubernetes label, so it is DNS-label safe.
	Team        string
	Description string
	// Schedule is the cron schedule from the job's config, hashed fields resolved;
	// deployments default to it (to SentSchedule).
	Schedule string
	// HashedSchedule is the schedule as sent when it has hashed fields (H), "" otherwise
	// (ResolveSchedule).
	HashedSchedule                 string `json:",omitempty"`
	DBDefaultType                  string
	Contacts                       Contacts
	GenerateKeytab                 bool
	EnableExecutionNotifications   bool
	NotificationDelayPeriodMinutes int
	// Generation is bumped by every change that can affect the rendered CronJob.
	Generation int64
	// Revision is the database's revision of the job's rendering: a value of one
	// sequence, drawn anew with each generation (store migration 0015). The CronJob
	// carries it, so that a live CronJob newer than its row betrays a restored database.
	Revision int64
	// TeamOAuth is true when the job's team has OAuth credentials: its pods then read them
	// from the team's Secret (kube.TeamOAuthSecretName). Only the synchronizer's reads
	// (store.LoadSyncState) fill it; it is not a column of the job.
	TeamOAuth bool
	// ManagedBy is the file that owns the job ("": none): the repository of the jobs-as-code
	// apply that last wrote it. Other writes are refused (CheckOwner) until it is released.
	ManagedBy string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// SentSchedule is the job's schedule as its user sent it (hashed fields unresolved).
func (j Job) SentSchedule() string { return cmp.Or(j.HashedSchedule, j.Schedule) }

// SentSchedule is the deployment's schedule as its user sent it (hashed fields
// unresolved): what a change that does not give a schedule resolves again.
func (d Deployment) SentSchedule() string { return cmp.Or(d.HashedSchedule, d.Schedule) }

// Contacts are the notification recipients of a job.
type Contacts struct {
	NotifiedOnJobFailureUserError     []string
	NotifiedOnJobFailurePlatformError []string
	NotifiedOnJobSuccess              []string
	NotifiedOnJobDeploy               []string
}

// SyncStatus is where the synchronizer stands with a deployment.
type SyncStatus string

// The sync statuses a deployment can be in.
const (
	// StatusPending: the desired state changed and has not been applied yet.
	StatusPending SyncStatus = "pending"
	// StatusSynced: the CronJob matches the desired state of the recorded generation.
	StatusSynced SyncStatus = "synced"
	// StatusUserError: Kubernetes rejected the spec; not retried until the desired state changes.
	StatusUserError SyncStatus = "user_error"
	// StatusPlatformError: applying failed for a reason outside the user's control; retried with backoff.
	StatusPlatformError SyncStatus = "platform_error"
	// StatusBuilding: the image of the deployment's job version is being built; the
	// CronJob keeps its previous image meanwhile.
	StatusBuilding SyncStatus = "building"
	// StatusDeleting: the deployment was removed and its CronJob is being deleted.
	StatusDeleting SyncStatus = "deleting"
)

// SyncStatuses are the sync statuses, in the order a user reads them.
func SyncStatuses() []string {
	return []string{
		string(StatusSynced), string(StatusPending), string(StatusBuilding), string(StatusUserError),
		string(StatusPlatformError), string(StatusDeleting),
	}
}

// Resources are a deployment's requests and limits. A zero value means "use the
// configured default". CPU is in millicores, memory in bytes.
type Resources struct {
	CPURequestMillis   int64
	CPULimitMillis     int64
	MemoryRequestBytes int64
	MemoryLimitBytes   int64
}

// Deployment is the desired deployment of a job: the complete configuration the
// synchronizer renders into a CronJob, and where it stands in syncing it.
type Deployment struct {
	JobName       string
	JobVersion    string // git commit sha or any version tag of the job image
	VDKVersion    string
	PythonVersion string
	// Schedule is the cron schedule the CronJob runs, hashed fields resolved; empty means
	// it never fires.
	Schedule string
	// HashedSchedule is the schedule as sent when it has hashed fields (H), "" otherwise
	// (ResolveSchedule). Revisions keep it, so that a rollback restores it.
	HashedSchedule string `json:",omitempty"`
	Resources      Resources
	Enabled        bool
	// Policy is how its runs are run (retries, timeout, concurrency, time zone, ...).
	Policy RunPolicy
	// ExecutionProfile names the profile its pods run with (docs/profiles.md; empty is
	// DefaultProfile).
	ExecutionProfile string
	// ExecutionTarget names the execution target it runs in (docs/targets.md); empty is
	// its team's default target.
	ExecutionTarget string
	// Profile is that profile as read with the deployment (nil when not read): what the
	// rendering adds to the pods. It is not part of the desired row.
	Profile *Profile
	// Adopted is set for a deployment imported from a CronJob that datajobs did not create:
	// its spec is kept as it was, so adopting it changes nothing but labels and annotations.
	Adopted *Adoption
	// Image, when set, is the image the synchronizer built for JobVersion, by digest; it
	// replaces <registry>/<job>:<version> in the CronJob. It is not part of the desired row.
	Image string
	// DeployedBy is who made the last change.
	DeployedBy   string
	DeployedDate time.Time
	// Status, Message, StatusGeneration and LastSyncAt are written by the synchronizer.
	Status           SyncStatus
	Message          string
	StatusGeneration int64
	LastSyncAt       *time.Time
}

// Adoption is the CronJob an imported deployment came from.
type Adoption struct {
	// CronJobUID is the UID of the CronJob to adopt; no other object of that name is touched.
	CronJobUID string
	// Spec is the JSON of the imported CronJob's spec, verbatim: it replaces datajobs' own
	// pod template for this job, with only what the deployment controls set on it.
	Spec []byte
}

// ActualDeployment is what the synchronizer last applied to Kubernetes for a job name.
// It outlives the job until the CronJob is confirmed gone.
type ActualDeployment struct {
	JobName string
	// JobUID and Generation are those of the job row the CronJob was rendered from.
	JobUID               string
	Generation           int64
	Team                 string
	DeploymentVersionSHA string // hash of the canonical rendered CronJob
	JobVersion           string
	VDKVersion           string
	PythonVersion        string
	Schedule             string
	Resources            Resources // effective values, defaults filled in
	Enabled              bool
	DeployedBy           string
	DeployedDate         time.Time // when the CronJob was last created or changed
	// CronJobGeneration is the CronJob's metadata.generation as last applied or verified
	// (0: unknown). Kubernetes bumps it on every spec change, and only then.
	CronJobGeneration int64
	// CronJobUID is the UID of that CronJob (empty: unknown). A CronJob deleted and
	// re-created starts again at generation 1, so only UID and generation together say
	// that it is the very object last applied.
	CronJobUID string
	// Image is the image of the CronJob's main container as applied (by digest when the
	// synchronizer built it; empty: unknown). A pipeline run pins it at its start.
	Image string
}

// SameConfig reports whether two jobs render the same CronJob: everything but the
// identity, the description, the generation and the timestamps (a change of any other
// field bumps the generation). Absent and empty contact lists are the same.
func (j Job) SameConfig(o Job) bool {
	return j.Team == o.Team && j.Schedule == o.Schedule && j.HashedSchedule == o.HashedSchedule && j.DBDefaultType == o.DBDefaultType &&
		j.GenerateKeytab == o.GenerateKeytab && j.EnableExecutionNotifications == o.EnableExecutionNotifications &&
		j.NotificationDelayPeriodMinutes == o.NotificationDelayPeriodMinutes && j.Contacts.Same(o.Contacts)
}

// Same reports whether two sets of contacts hold the same lists; absent is empty.
func (c Contacts) Same(o Contacts) bool {
	return slices.Equal(c.NotifiedOnJobFailureUserError, o.NotifiedOnJobFailureUserError) &&
		slices.Equal(c.NotifiedOnJobFailurePlatformError, o.NotifiedOnJobFailurePlatformError) &&
		slices.Equal(c.NotifiedOnJobSuccess, o.NotifiedOnJobSuccess) &&
		slices.Equal(c.NotifiedOnJobDeploy, o.NotifiedOnJobDeploy)
}

// SameConfig reports whether two deployments render the same CronJob: everything but who
// deployed it, when, and the sync state. A deployment request that changes nothing of it
// is a no-op: no write, no new generation, no work for the synchronizer.
func (d Deployment) SameConfig(o Deployment) bool {
	return d.JobVersion == o.JobVersion && d.VDKVersion == o.VDKVersion && d.PythonVersion == o.PythonVersion &&
		d.Schedule == o.Schedule && d.HashedSchedule == o.HashedSchedule && d.Resources == o.Resources && d.Enabled == o.Enabled && d.Policy.Same(o.Policy) &&
		d.ProfileName() == o.ProfileName() && d.ExecutionTarget == o.ExecutionTarget
}

// ProfileName is the profile the deployment selects: ExecutionProfile, or DefaultProfile.
func (d Deployment) ProfileName() string {
	if d.ExecutionProfile == "" {
		return DefaultProfile
	}
	return d.ExecutionProfile
}
