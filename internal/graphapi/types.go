package graphapi

import (
	"cmp"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/datajobs/datajobs/internal/graphapi/gql"
	"github.com/datajobs/datajobs/internal/job"
)

// The root resolvers shape what the store read into the generated types of package gql,
// whose fields the generated executor reads directly; only the executions of a page are
// read later, by the deployment's resolvers, once per page.

// totals are totalItems and totalPages; totalPages is 0 for an empty result (VDK says 1).
// total is -1 when it was not counted (then neither was selected).
func totals(total, size int) (items, pages int32) {
	if total <= 0 {
		return 0, 0
	}
	return int32(total), int32((total + size - 1) / size)
}

// noDeployments is the deployments of a job without one; the executor only reads it.
var noDeployments = []*gql.DataJobDeployment{}

// toDataJob shapes one row of a page into out. A job's deployment is the desired one with
// the unset resources filled in, or, while a deleted deployment's CronJob is being
// removed, the one last applied, as the REST API shows it.
func (l *loader) toDataJob(out *gql.DataJob, row *job.Listed) {
	j := &row.Job
	*out = gql.DataJob{
		JobName: j.Name,
		Config: gql.DataJobConfig{
			Team: j.Team, Description: j.Description,
			Schedule:                       l.schedule(j.Schedule, j.HashedSchedule, "", l.configNextRun),
			Contacts:                       j.Contacts,
			GenerateKeytab:                 j.GenerateKeytab,
			EnableExecutionNotifications:   j.EnableExecutionNotifications,
			NotificationDelayPeriodMinutes: int32(j.NotificationDelayPeriodMinutes),
			DbDefaultType:                  j.DBDefaultType,
			SourceURL:                      job.Template(l.h.cfg.SourceURLTemplate).Render(j.Name, j.Team, ""),
			LogsURL:                        job.Template(l.h.cfg.LogsURLTemplate).Render(j.Name, j.Team, ""),
		},
		Deployments: noDeployments,
	}
	if row.Desired == nil && row.Actual == nil {
		return
	}
	var d job.Deployment
	dep := &gql.DataJobDeployment{ID: j.Name, Mode: "release", Contacts: j.Contacts, DesiredGeneration: int32(j.Generation), Page: l}
	if row.Actual != nil {
		dep.AppliedGeneration = int32(row.Actual.Generation)
	}
	if row.Desired != nil {
		d = *row.Desired
		d.Resources = job.ResourceBounds{Default: l.h.cfg.DefaultResources}.Effective(d.Resources)
		dep.SyncStatus, dep.Message = string(d.Status), d.Message
		// A result recorded for an older generation says nothing about the current one.
		if d.StatusGeneration < j.Generation {
			dep.SyncStatus, dep.Message = string(job.StatusPending), ""
		}
		dep.LastSyncTime = formatTimePtr(d.LastSyncAt)
	} else {
		a := row.Actual
		d = job.Deployment{
			JobVersion: a.JobVersion, VDKVersion: a.VDKVersion, PythonVersion: a.PythonVersion, Schedule: a.Schedule,
			Resources: a.Resources, Enabled: a.Enabled, DeployedBy: a.DeployedBy, DeployedDate: a.DeployedDate,
		}
		dep.SyncStatus = string(job.StatusDeleting)
	}
	dep.Enabled, dep.JobVersion, dep.JobPythonVersion, dep.VdkVersion = d.Enabled, d.JobVersion, d.PythonVersion, d.VDKVersion
	dep.LastDeployedDate, dep.LastDeployedBy = formatTime(d.DeployedDate), d.DeployedBy
	dep.Resources = toResources(d.Resources)
	dep.RunPolicy = toRunPolicy(d.Policy.Effective(job.DefaultTimeout(l.h.cfg.MaxExecutionTimeout)))
	dep.Schedule = l.schedule(d.Schedule, d.HashedSchedule, d.Policy.TimeZone, l.deploymentNextRun)
	dep.Status = vdkStatus(job.SyncStatus(dep.SyncStatus), dep.Message)
	if s := row.LastExecution.Status; s != "" {
		s = strings.ToUpper(s)
		dep.LastExecutionStatus = &s
	}
	dep.LastExecutionTime = formatTimePtr(row.LastExecution.EndTime)
	if v := row.LastExecution.DurationSeconds; v != nil {
		n := int32(*v)
		dep.LastExecutionDuration = &n
	}
	out.Deployments = []*gql.DataJobDeployment{dep}
}

// vdkStatus is VDK's deployment status: SUCCESS once synced, the error kind when the last
// attempt failed, NONE while pending or being deleted. A failure carries its message
// ("USER_ERROR: the image … does not exist …"): `vdk list` prints this field and no other
// of the deployment's, and a user who sees USER_ERROR needs the why.
func vdkStatus(s job.SyncStatus, message string) string {
	var status string
	switch s {
	case job.StatusSynced:
		return "SUCCESS"
	case job.StatusUserError:
		status = "USER_ERROR"
	case job.StatusPlatformError:
		status = "PLATFORM_ERROR"
	default:
		return "NONE"
	}
	if message == "" {
		return status
	}
	return status + ": " + message
}

// schedule shapes a cron schedule, with its next run when selected (it is computed only
// then; -1 otherwise) as the schedule fires in time zone tz: a deployment's run policy's,
// or "" (UTC) for the job configuration's, which has none. cron is resolved, hashed the
// form with H it was resolved from ("" without H).
func (l *loader) schedule(cron, hashed, tz string, withNextRun bool) gql.DataJobSchedule {
	s := gql.DataJobSchedule{ScheduleCron: cmp.Or(hashed, cron), ScheduleCronResolved: cron, NextRunEpochSeconds: -1}
	if withNextRun {
		s.NextRunEpochSeconds = l.nextRun(job.ZonedSchedule(cron, tz))
	}
	return s
}

// toResources is in cores and MiB, as in VDK. VDK's schema has the other (misspelt)
// fields and never fills them.
func toResources(r job.Resources) gql.DataJobResources {
	return gql.DataJobResources{
		CPURequest: float64(r.CPURequestMillis) / 1000, CPULimit: float64(r.CPULimitMillis) / 1000,
		MemoryRequest: mib(r.MemoryRequestBytes), MemoryLimit: mib(r.MemoryLimitBytes),
	}
}

func mib(b int64) int32 { return int32(math.Round(float64(b) / (1 << 20))) }

// formatTime is how the REST API writes times (encoding/json's RFC 3339).
func formatTime(t time.Time) string { return t.Format(time.RFC3339Nano) }

func formatTimePtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := formatTime(*t)
	return &s
}

// toExecutions shapes executions, each with the snapshot of the deployment it ran, with
// VDK's fixed id, mode and enabled.
func (h *Handler) toExecutions(rows []job.Execution) []*gql.DataJobExecution {
	l := h.newLoader(nil) // the next runs of the snapshots' schedules
	all := make([]gql.DataJobExecution, len(rows))
	out := make([]*gql.DataJobExecution, len(rows))
	for i := range rows {
		e := &rows[i]
		deployedDate := formatTimePtr(e.DeployedDate)
		all[i] = gql.DataJobExecution{
			ID: e.ID, Type: strings.ToUpper(e.Type), JobName: e.JobName, Status: strings.ToUpper(e.Status),
			StartTime: formatTimePtr(e.StartTime), EndTime: formatTimePtr(e.EndTime),
			StartedBy: e.StartedBy, Message: e.Message, OpID: e.OpID,
			LogsURL:    job.Template(h.cfg.LogsURLTemplate).Render(e.JobName, "", e.ID),
			JobVersion: e.JobVersion, JobSchedule: e.JobSchedule, JobPythonVersion: e.PythonVersion,
			VdkVersion: e.VDKVersion, VkdVersion: e.VDKVersion,
			ResourcesCPURequest: cores(e.Resources.CPURequestMillis), ResourcesCPULimit: cores(e.Resources.CPULimitMillis),
			ResourcesMemoryRequest: mibPtr(e.Resources.MemoryRequestBytes), ResourcesMemoryLimit: mibPtr(e.Resources.MemoryLimitBytes),
			DeployedDate: deployedDate, DeployedBy: e.DeployedBy,
			Deployment: gql.DataJobExecutionDeployment{
				ID: "release", Mode: "release", Enabled: true,
				JobVersion: e.JobVersion, JobPythonVersion: e.PythonVersion, VdkVersion: e.VDKVersion,
				Schedule:  l.schedule(e.JobSchedule, "", "", true), // the run stores no time zone
				Resources: toResources(e.Resources), DeployedDate: deployedDate, DeployedBy: e.DeployedBy,
			},
		}
		out[i] = &all[i]
	}
	return out
}

func cores(millis int64) *float64 {
	if millis == 0 {
		return nil
	}
	v := float64(millis) / 1000
	return &v
}

func mibPtr(b int64) *int32 {
	if b == 0 {
		return nil
	}
	v := mib(b)
	return &v
}

func itoa(n int) string { return strconv.Itoa(n) }

// toRunPolicy is an effective run policy in GraphQL's 32-bit integers.
func toRunPolicy(p job.RunPolicy) gql.DataJobRunPolicy {
	clamp := func(v int64) int32 { return int32(min(v, math.MaxInt32)) }
	return gql.DataJobRunPolicy{
		Retries: *p.Retries, TimeoutSeconds: clamp(p.TimeoutSeconds), ConcurrencyPolicy: p.ConcurrencyPolicy,
		TimeZone: p.TimeZone, StartingDeadlineSeconds: clamp(p.StartingDeadlineSeconds), CatchUp: int32(p.CatchUp),
	}
}
