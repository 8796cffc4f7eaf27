package service

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/datajobs/datajobs/internal/job"
)

// DeploymentView is a job's deployment as the API shows it: the configuration users
// asked for, what the synchronizer actually applied, and where it stands.
type DeploymentView struct {
	// Job is the deployed job (contacts and schedule come from it).
	Job job.Job
	// Deployment is the desired deployment with effective resources (defaults filled
	// in). While a deleted deployment is being removed, it is rebuilt from the actual row.
	Deployment job.Deployment
	// Actual is what the synchronizer last applied for this job, or nil.
	Actual *job.ActualDeployment
	// Status is pending, synced, user_error, platform_error or deleting; Message explains
	// an error.
	Status  job.SyncStatus
	Message string
	// DesiredGeneration is the job's generation; AppliedGeneration the one the CronJob
	// was rendered from (0 when nothing is applied).
	DesiredGeneration int64
	AppliedGeneration int64
	// LastSyncAt is when the synchronizer last looked at this deployment, if ever.
	LastSyncAt *time.Time
	// PolicySet is the run policy as the deployment set it: its zero fields are the
	// defaults that Deployment.Policy has filled in (the console marks them).
	PolicySet job.RunPolicy
}

// GetDeployment reads the deployment of the job name of team from the database. A
// deployment that was deleted but whose CronJob the synchronizer has not yet removed is
// shown with status deleting; after that it is not found.
func (s *Service) GetDeployment(ctx context.Context, team, name string) (DeploymentView, error) {
	st, err := s.store.GetDeploymentState(ctx, team, name)
	if err != nil {
		return DeploymentView{}, err
	}
	v, ok := s.view(st.Job, st.Desired, st.Actual)
	if !ok {
		return DeploymentView{}, job.DeploymentNotFound(name)
	}
	return v, nil
}

// ListDeployments returns the deployments of the job name of team: none or one.
func (s *Service) ListDeployments(ctx context.Context, team, name string) ([]DeploymentView, error) {
	st, err := s.store.GetDeploymentState(ctx, team, name)
	if err != nil {
		return nil, err
	}
	v, ok := s.view(st.Job, st.Desired, st.Actual)
	if !ok {
		return []DeploymentView{}, nil
	}
	return []DeploymentView{v}, nil
}

func (s *Service) view(j job.Job, desired *job.Deployment, actual *job.ActualDeployment) (DeploymentView, bool) {
	v := DeploymentView{Job: j, Actual: actual, DesiredGeneration: j.Generation}
	if actual != nil {
		v.AppliedGeneration = actual.Generation
	}
	switch {
	case desired != nil:
		v.Deployment = *desired
		v.Deployment.Resources = s.cfg.Resources.Effective(desired.Resources)
		v.Deployment.Policy = desired.Policy.Effective(job.DefaultTimeout(s.cfg.MaxExecutionTimeout))
		v.PolicySet = desired.Policy
		v.LastSyncAt = desired.LastSyncAt
		v.Status, v.Message = desired.Status, desired.Message
		// A result recorded for an older generation says nothing about the current one.
		if desired.StatusGeneration < j.Generation {
			v.Status, v.Message = job.StatusPending, ""
		}
	case actual != nil:
		v.Deployment = job.Deployment{
			JobName: j.Name, JobVersion: actual.JobVersion, VDKVersion: actual.VDKVersion,
			PythonVersion: actual.PythonVersion, Schedule: actual.Schedule, Resources: actual.Resources,
			Enabled: actual.Enabled, DeployedBy: actual.DeployedBy, DeployedDate: actual.DeployedDate,
			Policy: job.RunPolicy{}.Effective(job.DefaultTimeout(s.cfg.MaxExecutionTimeout)),
		}
		v.Status = job.StatusDeleting
	default:
		return DeploymentView{}, false
	}
	return v, true
}

// Deploy is VDK's POST deployment: it creates the job's desired deployment or merges c
// into it, and returns at once (the synchronizer applies it). VDK's compatibility fills
// come first: an absent schedule is the job's schedule and an absent enabled is true.
// Then every field c gives wins; absent ones keep the stored value (resources per field),
// or on a first deployment take their defaults: the configured python version, the
// default VDK version, the configured resources. A first deployment needs a job_version.
func (s *Service) Deploy(ctx context.Context, team, name string, c job.DeploymentChange, user string) (job.Deployment, error) {
	c, profile, err := s.checkChange(ctx, team, name, c, user)
	if err != nil {
		return job.Deployment{}, err
	}
	enabled := true
	if c.Enabled == nil {
		c.Enabled = &enabled
	}
	return s.store.ChangeDeployment(ctx, team, name, func(j job.Job, cur *job.Deployment) (job.Deployment, error) {
		fill := c
		if fill.Schedule == nil {
			sent := j.SentSchedule()
			fill.Schedule = &sent
		}
		base := job.Deployment{PythonVersion: s.cfg.DefaultPythonVersion}
		if cur != nil {
			base = *cur
		} else if fill.JobVersion == nil {
			return job.Deployment{}, job.Invalid("job_version", "given on the first deployment of a job", "absent")
		}
		return s.finish(j, withProfile(fill.ApplyTo(base), profile), user)
	})
}

// PatchDeployment is VDK's PATCH deployment: it changes only the fields c gives (unlike
// VDK, an absent enabled keeps the deployment as it is). A job without a desired
// deployment is not found.
func (s *Service) PatchDeployment(ctx context.Context, team, name string, c job.DeploymentChange, user string) (job.Deployment, error) {
	c, profile, err := s.checkChange(ctx, team, name, c, user)
	if err != nil {
		return job.Deployment{}, err
	}
	return s.store.ChangeDeployment(ctx, team, name, func(j job.Job, cur *job.Deployment) (job.Deployment, error) {
		if cur == nil {
			return job.Deployment{}, job.DeploymentNotFound(name)
		}
		return s.finish(j, withProfile(c.ApplyTo(*cur), profile), user)
	})
}

// withProfile is d with the profile a change selected (nil: d keeps its own).
func withProfile(d job.Deployment, p *job.Profile) job.Deployment {
	if p != nil {
		d.ExecutionProfile, d.Profile = p.Name, p
	}
	return d
}

// DeleteDeployment deletes the desired deployment of the job name of team; the
// synchronizer deletes the CronJob.
func (s *Service) DeleteDeployment(ctx context.Context, team, name string) error {
	return s.store.DeleteDeployment(ctx, team, name)
}

// checkChange validates c and returns it as it is stored: its schedule trimmed, and when
// it deploys a version, the run policy of that version's config.ini under its own fields.
// The execution profile it selects (the body's, else config.ini's) must be granted to the
// team; it is returned read (nil: the change selects none).
func (s *Service) checkChange(ctx context.Context, team, name string, c job.DeploymentChange, user string) (job.DeploymentChange, *job.Profile, error) {
	if err := ValidateUser(user); err != nil {
		return c, nil, err
	}
	if c.JobVersion != nil {
		fromConfig, err := s.store.SourcesPolicy(ctx, team, name, *c.JobVersion)
		if err != nil {
			return c, nil, err
		}
		c.Policy = c.Policy.Or(fromConfig)
	}
	return s.checkedChange(ctx, team, c, user)
}

// checkedChange is checkChange of c whose run policy has config.ini's under its own
// fields already (an apply reads every version's at once: store.SourcesPolicies).
func (s *Service) checkedChange(ctx context.Context, team string, c job.DeploymentChange, user string) (job.DeploymentChange, *job.Profile, error) {
	if c.Schedule != nil {
		clean := job.CleanSchedule(*c.Schedule)
		c.Schedule = &clean
	}
	// The body's execution_profile and config.ini's arrive with the run policy's keys.
	c.ExecutionProfile, c.Policy.ExecutionProfile = cmp.Or(c.ExecutionProfile, c.Policy.ExecutionProfile), nil
	c.ExecutionTarget, c.Policy.ExecutionTarget = cmp.Or(c.ExecutionTarget, c.Policy.ExecutionTarget), nil
	if err := c.Validate(s.cfg.SupportedPythonVersions, s.cfg.Resources); err != nil {
		return c, nil, err
	}
	if c.ExecutionProfile == nil {
		return c, nil, nil
	}
	p, err := s.grantedProfile(ctx, user, team, *c.ExecutionProfile)
	return c, p, err
}

// finish stamps a merged deployment of job j, resolves its schedule's hashed fields
// (every write resolves them again, with the job's team and name of the time) and checks
// its resources as a whole: each limit at least its request once the defaults fill the
// unset ones.
func (s *Service) finish(j job.Job, d job.Deployment, user string) (job.Deployment, error) {
	d.Schedule, d.HashedSchedule = job.ResolveSchedule(j.Team, j.Name, d.SentSchedule())
	if err := s.cfg.Resources.Validate(d.Resources); err != nil {
		return job.Deployment{}, err
	}
	if err := d.Policy.Validate(s.cfg.MaxExecutionTimeout); err != nil {
		return job.Deployment{}, err
	}
	if d.Profile != nil {
		if err := d.Profile.Resources.CapResources(s.cfg.Resources.Effective(d.Resources)); err != nil {
			return job.Deployment{}, err
		}
	}
	d.DeployedBy, d.DeployedDate = user, s.now()
	return d, nil
}

// GetProperties returns the properties of the job name of team, a JSON object.
func (s *Service) GetProperties(ctx context.Context, team, name string) ([]byte, error) {
	return s.store.GetProperties(ctx, team, name)
}

// SetProperties replaces the properties of the job name of team; props must be a JSON
// object.
func (s *Service) SetProperties(ctx context.Context, team, name string, props []byte) error {
	return s.ReplaceProperties(ctx, team, name, props, "")
}

// ReplaceProperties is SetProperties with a precondition: ifMatch, when not empty, must
// name the current PropertiesETag, checked under the job's lock.
func (s *Service) ReplaceProperties(ctx context.Context, team, name string, props []byte, ifMatch IfMatch) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(props, &obj); err != nil || obj == nil {
		return job.Invalid("properties", "a JSON object", "not one")
	}
	return s.store.SetProperties(ctx, team, name, props, func(cur []byte) error {
		return ifMatch.check(fmt.Sprintf("The properties of data job %q", name), PropertiesETag(cur))
	})
}
