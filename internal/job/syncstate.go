package job

import "time"

// What the synchronizer reads and writes: the state of one job name, the fence of a
// leader term, and the image builds of its build stage.

// SyncState is what the synchronizer reads from the database for one job name. Any part
// may be absent: a job without a deployment, an actual row whose job is gone (to delete),
// or an actual row of an older incarnation of the name (its JobUID differs from Job's).
type SyncState struct {
	Name    string
	Job     *Job
	Desired *Deployment
	Actual  *ActualDeployment
	// Intents are the job UIDs of the CronJobs of this name the synchronizer wrote (or
	// was about to write) and has not recorded in an actual row yet: a CronJob carrying one
	// of them is known to the database even after its job is gone.
	Intents []string
	// Build is the image build state of Desired (the store reads it with the sync state); nil without a desired deployment.
	Build *BuildState
	// Elsewhere is set, by the read of one execution target's shard (store.TargetView),
	// for a job whose team runs in another target: Job and Desired are left out, and a
	// CronJob of its incarnation in this shard's namespace is a delete the database asks
	// for (the team moved), not an orphan.
	Elsewhere *Elsewhere
}

// Elsewhere is the incarnation JobUID of a job whose CronJob belongs in Target.
type Elsewhere struct {
	Target string
	JobUID string
}

// Intended reports whether uid is one of the intents of the name.
func (st SyncState) Intended(uid string) bool {
	for _, u := range st.Intents {
		if u == uid {
			return true
		}
	}
	return false
}

// Intent is a CronJob the synchronizer is about to write for generation Generation of
// incarnation JobUID of job JobName (store.RecordIntents).
type Intent struct {
	JobName    string
	JobUID     string
	Generation int64
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
	// Attempts counts the builds of the deployment's key (job version, python version,
	// AttemptBase) started since the last one that ended (with an image or a user error),
	// the last at LastAttempt: builds that failed on the platform or never finished.
	Attempts    int
	AttemptBase string
	LastAttempt time.Time
	// Hold, set by the synchronizer's build stage, says why the CronJob must wait (its
	// image is being built); the plan then leaves the CronJob as it is.
	Hold string
}

// BuildKey names one build: what a built image depends on besides the sources' content.
type BuildKey struct {
	JobName, JobUID string
	JobVersion      string
	PythonVersion   string
	BaseImage       string
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
