package gitops

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/datajobs/datajobs/internal/job"
	pl "github.com/datajobs/datajobs/internal/pipeline"
	"github.com/datajobs/datajobs/internal/trigger"
)

// Domain is the job j of team as the API's POST reads a DataJob body: VDK's defaults for
// absent fields. The API decodes its bodies with it: the file's job is the API's.
func (j Job) Domain(team string) job.Job {
	out := job.Job{
		Name: j.JobName, Team: team, Description: j.Description,
		GenerateKeytab:                 job.DefaultGenerateKeytab,
		EnableExecutionNotifications:   job.DefaultEnableExecutionNotifications,
		NotificationDelayPeriodMinutes: job.DefaultNotificationDelayPeriodMinutes,
	}
	if c := j.Config; c != nil {
		out.DBDefaultType = c.DBDefaultType
		if c.Contacts != nil {
			out.Contacts = job.Contacts(*c.Contacts)
		}
		if c.Schedule != nil {
			out.Schedule = c.Schedule.ScheduleCron
		}
		out.GenerateKeytab = deref(c.GenerateKeytab, out.GenerateKeytab)
		out.EnableExecutionNotifications = deref(c.EnableExecutionNotifications, out.EnableExecutionNotifications)
		out.NotificationDelayPeriodMinutes = deref(c.NotificationDelayPeriodMinutes, out.NotificationDelayPeriodMinutes)
	}
	return out
}

// Target is the job j of team, validated, and its deployment as the change of a first
// deployment (nil: not deployed), for the service to finish: config.ini's run policy and
// the installation's defaults are the service's.
func (j Job) Target(team string) (job.Job, *job.DeploymentChange, error) {
	out := j.Domain(team)
	out.Schedule = job.CleanSchedule(out.Schedule)
	if err := job.ValidateJob(out); err != nil {
		return job.Job{}, nil, err
	}
	out.Schedule, out.HashedSchedule = job.ResolveSchedule(team, out.Name, out.Schedule)
	if j.Deployment == nil {
		return out, nil, nil
	}
	d := j.Deployment
	if d.Source != "" && d.JobVersion == "" {
		return job.Job{}, nil, sourceNotResolved(d.Source)
	}
	enabled := deref(d.Enabled, true)
	schedule := out.SentSchedule()
	if d.Schedule != nil {
		schedule = d.Schedule.ScheduleCron
	}
	c := job.DeploymentChange{
		JobVersion: &d.JobVersion, Enabled: &enabled, Schedule: &schedule, Policy: d.PolicyChange,
	}
	if d.PythonVersion != "" {
		c.PythonVersion = &d.PythonVersion
	}
	if d.VDKVersion != "" {
		c.VDKVersion = &d.VDKVersion
	}
	if r := d.Resources; r != nil {
		var err error
		if c.Resources, err = r.domain(); err != nil {
			return job.Job{}, nil, err
		}
	}
	return out, &c, nil
}

// SourceFolders is the source folder of each job of the file whose deployment names one
// with its version (the CLI resolved it), by job name: the versions the apply must find
// staged, or the jobs' sources already.
func (f File) SourceFolders() map[string]string {
	out := map[string]string{}
	for _, j := range f.Jobs {
		if d := j.Deployment; d != nil && d.Source != "" {
			out[j.JobName] = d.Source
		}
	}
	return out
}

// sourceNotResolved refuses a deployment's source folder sent to the API: a path on the
// machine that runs the CLI, which the service cannot and must not read.
func sourceNotResolved(folder string) *job.Error {
	e := job.Invalid("deployment.source", "absent", strconv.Quote(folder))
	e.Why = "deployment.source is a folder on the machine that runs `datajobs apply -f`, which packs it, uploads it and sends the file with its job_version: the service never reads local paths."
	e.Countermeasures = "Apply the file with `datajobs apply -f`, or upload the sources (POST .../jobs/{job}/sources) and give their deployment.job_version."
	return e
}

// domain converts the API's units; an absent (zero) resource is the default.
func (r Resources) domain() (job.Resources, error) {
	var out job.Resources
	var err error
	cpu := func(field string, cores float64, to *int64) {
		if err == nil && cores != 0 {
			*to, err = job.CPUFromCores(field, cores)
			// An exported millicore (1.234 cores) is that millicore, whatever the float's last bit.
			if m := math.Round(cores * 1000); math.Abs(cores*1000-m) < 1e-6 {
				*to = int64(m)
			}
		}
	}
	mem := func(field string, mib float64, to *int64) {
		if err == nil && mib != 0 {
			*to, err = job.MemoryFromMiB(field, mib)
		}
	}
	cpu("resources.cpu_request", r.CPURequest, &out.CPURequestMillis)
	cpu("resources.cpu_limit", r.CPULimit, &out.CPULimitMillis)
	mem("resources.memory_request", r.MemoryRequest, &out.MemoryRequestBytes)
	mem("resources.memory_limit", r.MemoryLimit, &out.MemoryLimitBytes)
	return out, err
}

// Spec is the pipeline p of team as its PUT would store it (pipeline.Parse: defaults and
// every rule of the contract).
func (p Pipeline) Spec(team string) (pl.Spec, error) {
	raw, err := json.Marshal(p)
	if err != nil {
		return pl.Spec{}, fmt.Errorf("encode pipeline %s: %w", p.Name, err)
	}
	return pl.Parse(team, p.Name, raw)
}

// TriggerSpec is the trigger t of team as its POST would store it (trigger.Parse:
// defaults and every rule of the contract).
func TriggerSpec(team string, t Trigger) (trigger.Spec, error) {
	raw, err := json.Marshal(t)
	if err != nil {
		return trigger.Spec{}, fmt.Errorf("encode trigger %s: %w", t.Name, err)
	}
	return trigger.Parse(team, raw)
}

// Export is the file of team's state st: applied, it plans no change (defaults are left
// out, so that the file holds what was chosen).
func Export(team string, st State) File {
	f := File{APIVersion: APIVersion, Team: team, Jobs: []Job{}, Pipelines: []Pipeline{}}
	for _, s := range st.Jobs {
		f.Jobs = append(f.Jobs, exportJob(s))
	}
	for _, p := range st.Pipelines {
		sp := p.Spec
		f.Pipelines = append(f.Pipelines, Pipeline{Name: p.Name, Body: pl.Body{
			Description: sp.Description, Schedule: sp.Schedule, Enabled: &sp.Enabled,
			MaxActiveRuns: &sp.MaxActiveRuns, Contacts: sp.Contacts, Nodes: sp.Nodes,
		}})
	}
	for _, t := range st.Triggers {
		f.Triggers = append(f.Triggers, t.Trigger.Spec)
	}
	for _, w := range st.Webhooks {
		f.Webhooks = append(f.Webhooks, exportWebhook(w))
	}
	return f
}

func exportJob(s job.JobState) Job {
	j := s.Job
	c := JobConfig{
		DBDefaultType:                  j.DBDefaultType,
		GenerateKeytab:                 unlessDefault(j.GenerateKeytab, job.DefaultGenerateKeytab),
		EnableExecutionNotifications:   unlessDefault(j.EnableExecutionNotifications, job.DefaultEnableExecutionNotifications),
		NotificationDelayPeriodMinutes: unlessDefault(j.NotificationDelayPeriodMinutes, job.DefaultNotificationDelayPeriodMinutes),
	}
	if !normal(j).Contacts.Same(normal(job.Job{}).Contacts) {
		ct := Contacts(j.Contacts)
		c.Contacts = &ct
	}
	if j.SentSchedule() != "" {
		c.Schedule = &Schedule{ScheduleCron: j.SentSchedule()}
	}
	out := Job{JobName: j.Name, Description: j.Description}
	if c != (JobConfig{}) {
		out.Config = &c
	}
	if d := s.Desired; d != nil {
		dep := &Deployment{
			JobVersion: d.JobVersion, Enabled: unlessDefault(d.Enabled, true),
			PythonVersion: d.PythonVersion, VDKVersion: d.VDKVersion, PolicyChange: policyOf(d.Policy),
		}
		if d.ProfileName() != job.DefaultProfile {
			dep.ExecutionProfile = &d.ExecutionProfile
		}
		if d.ExecutionTarget != "" {
			dep.ExecutionTarget = &d.ExecutionTarget
		}
		if d.SentSchedule() != j.SentSchedule() {
			dep.Schedule = &Schedule{ScheduleCron: d.SentSchedule()}
		}
		if r := d.Resources; r != (job.Resources{}) {
			dep.Resources = &Resources{
				CPURequest: float64(r.CPURequestMillis) / 1000, CPULimit: float64(r.CPULimitMillis) / 1000,
				MemoryRequest: mib(r.MemoryRequestBytes), MemoryLimit: mib(r.MemoryLimitBytes),
			}
		}
		out.Deployment = dep
	}
	return out
}

// policyOf is the change that sets p's fields (its zero fields are defaults: left out).
func policyOf(p job.RunPolicy) job.PolicyChange {
	c := job.PolicyChange{Retries: p.Retries}
	if p.TimeoutSeconds != 0 {
		c.TimeoutSeconds = &p.TimeoutSeconds
	}
	if p.ConcurrencyPolicy != "" {
		c.ConcurrencyPolicy = &p.ConcurrencyPolicy
	}
	if p.TimeZone != "" {
		c.TimeZone = &p.TimeZone
	}
	if p.StartingDeadlineSeconds != 0 {
		c.StartingDeadlineSeconds = &p.StartingDeadlineSeconds
	}
	if p.CatchUp != 0 {
		c.CatchUp = &p.CatchUp
	}
	return c
}

// mib is bytes in MiB, exactly (a division by a power of two).
func mib(b int64) float64 { return float64(b) / (1 << 20) }

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// unlessDefault is v, or nil when it is the default.
func unlessDefault[T comparable](v, def T) *T {
	if v == def {
		return nil
	}
	return &v
}
