package job

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
