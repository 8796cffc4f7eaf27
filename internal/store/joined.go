package store

import (
	"encoding/json"

	"github.com/datajobs/datajobs/internal/job"
)

// joinedDesiredColumns are the columns of a desired deployment d LEFT JOINed to its job:
// a presence flag, then every column with NULL read as a zero value. joined.desiredDest
// scans them.
const joinedDesiredColumns = `d.data_job_name IS NOT NULL, COALESCE(d.git_commit_sha, ''), COALESCE(d.vdk_version, ''),
	COALESCE(d.python_version, ''), COALESCE(d.schedule, ''),
	COALESCE(d.resources_cpu_request_millis, 0), COALESCE(d.resources_cpu_limit_millis, 0),
	COALESCE(d.resources_memory_request_bytes, 0), COALESCE(d.resources_memory_limit_bytes, 0),
	COALESCE(d.enabled, false), COALESCE(d.last_deployed_by, ''),
	COALESCE(d.last_deployed_date, 'epoch'::timestamptz), COALESCE(d.status, ''), COALESCE(d.message, ''),
	COALESCE(d.status_generation, 0), d.last_sync_at, COALESCE(d.run_policy, '{}'::jsonb), COALESCE(d.hashed_schedule, ''),
	COALESCE(d.execution_profile, ''), (SELECT p.spec FROM execution_profile p WHERE p.name = d.execution_profile),
	COALESCE(d.execution_target, '')`

// joinedActualColumns are the columns of the actual deployment a of the job's own
// incarnation (joined on the job's UID), LEFT JOINed like joinedDesiredColumns.
const joinedActualColumns = `a.data_job_name IS NOT NULL, COALESCE(a.generation, 0), COALESCE(a.team, ''),
	COALESCE(a.deployment_version_sha, ''), COALESCE(a.git_commit_sha, ''), COALESCE(a.vdk_version, ''),
	COALESCE(a.python_version, ''), COALESCE(a.schedule, ''),
	COALESCE(a.resources_cpu_request_millis, 0), COALESCE(a.resources_cpu_limit_millis, 0),
	COALESCE(a.resources_memory_request_bytes, 0), COALESCE(a.resources_memory_limit_bytes, 0),
	COALESCE(a.enabled, false), COALESCE(a.last_deployed_by, ''),
	COALESCE(a.last_deployed_date, 'epoch'::timestamptz), COALESCE(a.cronjob_generation, 0), COALESCE(a.cronjob_uid, '')`

// joined receives the joined columns of one row.
type joined struct {
	desired, hasActual bool
	status             string
	// profile is the selected profile's spec; profiles shares the decoded profiles of
	// one read among its rows (nil: each row decodes its own).
	profile  []byte
	profiles map[string]*job.Profile
	d        job.Deployment
	a        job.ActualDeployment
}

func (r *joined) desiredDest() []any {
	d := &r.d
	return []any{
		&r.desired, &d.JobVersion, &d.VDKVersion, &d.PythonVersion, &d.Schedule,
		&d.Resources.CPURequestMillis, &d.Resources.CPULimitMillis,
		&d.Resources.MemoryRequestBytes, &d.Resources.MemoryLimitBytes,
		&d.Enabled, &d.DeployedBy, &d.DeployedDate, &r.status, &d.Message, &d.StatusGeneration, &d.LastSyncAt, &d.Policy, &d.HashedSchedule,
		&d.ExecutionProfile, &r.profile, &d.ExecutionTarget,
	}
}

func (r *joined) actualDest() []any {
	a := &r.a
	return []any{
		&r.hasActual, &a.Generation, &a.Team, &a.DeploymentVersionSHA, &a.JobVersion, &a.VDKVersion,
		&a.PythonVersion, &a.Schedule,
		&a.Resources.CPURequestMillis, &a.Resources.CPULimitMillis,
		&a.Resources.MemoryRequestBytes, &a.Resources.MemoryLimitBytes,
		&a.Enabled, &a.DeployedBy, &a.DeployedDate, &a.CronJobGeneration, &a.CronJobUID,
	}
}

// deployment returns the scanned desired deployment of job j, or nil without one.
func (r *joined) deployment(j job.Job) *job.Deployment {
	if !r.desired {
		return nil
	}
	d := r.d
	d.JobName, d.Status = j.Name, job.SyncStatus(r.status)
	d.Profile = r.decodeProfile(d.ExecutionProfile)
	return &d
}

// decodeProfile decodes the scanned profile spec of name, once per distinct spec of a
// read that shares r.profiles: a thousand deployments of one profile hold one copy.
func (r *joined) decodeProfile(name string) *job.Profile {
	if r.profile == nil {
		return nil
	}
	key := name + "\x00" + string(r.profile)
	if p, ok := r.profiles[key]; ok {
		return p
	}
	p := &job.Profile{}
	if err := json.Unmarshal(r.profile, p); err != nil {
		return nil // the API wrote it from a job.Profile: it always decodes
	}
	p.Name = name
	if r.profiles != nil {
		r.profiles[key] = p
	}
	return p
}

// actual returns the scanned actual deployment of job j's incarnation, or nil without one.
func (r *joined) actual(j job.Job) *job.ActualDeployment {
	if !r.hasActual {
		return nil
	}
	a := r.a
	a.JobName, a.JobUID = j.Name, j.UID
	return &a
}
