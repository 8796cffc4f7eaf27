package graphapi

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/store"
)

// The output types. The root resolvers build them from what the store read, as plain
// structs whose exported fields the library reads directly (no call per field); only the
// executions of a page are read later, by methods, once per page.

type jobPage struct {
	Content    []*dataJob
	TotalItems int32
	TotalPages int32
}

// totals are totalItems and totalPages; totalPages is 0 for an empty result (VDK says 1).
// total is -1 when it was not counted (then neither was selected).
func totals(total, size int) (items, pages int32) {
	if total <= 0 {
		return 0, 0
	}
	return int32(total), int32((total + size - 1) / size)
}

type dataJob struct {
	JobName string
	Config  *jobConfig
	// Deployments is [] for a job without a deployment, else its one deployment.
	Deployments []*deployment
}

type jobConfig struct {
	Team                           string
	Description                    string
	Schedule                       *schedule
	Contacts                       *contacts
	GenerateKeytab                 bool
	EnableExecutionNotifications   bool
	NotificationDelayPeriodMinutes int32
	DBDefaultType                  string
	SourceURL                      *string
	LogsURL                        *string
}

type schedule struct {
	ScheduleCron string
	// NextRunEpochSeconds is -1 when the schedule is empty or never fires (or when the
	// field is not selected: it is computed only then).
	NextRunEpochSeconds int32
}

type contacts struct {
	NotifiedOnJobFailureUserError     []string
	NotifiedOnJobFailurePlatformError []string
	NotifiedOnJobSuccess              []string
	NotifiedOnJobDeploy               []string
}

func toContacts(c job.Contacts) *contacts {
	return &contacts{
		NotifiedOnJobFailureUserError:     nonNil(c.NotifiedOnJobFailureUserError),
		NotifiedOnJobFailurePlatformError: nonNil(c.NotifiedOnJobFailurePlatformError),
		NotifiedOnJobSuccess:              nonNil(c.NotifiedOnJobSuccess),
		NotifiedOnJobDeploy:               nonNil(c.NotifiedOnJobDeploy),
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

type deployment struct {
	// ID is the job name, as VDK answers when it reads deployments from its database.
	ID                    string
	Mode                  string
	Enabled               bool
	Contacts              *contacts
	JobVersion            string
	JobPythonVersion      string
	VDKVersion            string
	LastDeployedDate      string
	LastDeployedBy        string
	Resources             *resources
	Schedule              *schedule
	Status                string
	LastExecutionStatus   *string
	LastExecutionTime     *string
	LastExecutionDuration *int32
	SyncStatus            string
	Message               string
	DesiredGeneration     int32
	AppliedGeneration     int32
	LastSyncTime          *string

	req *jobsRequest
}

// toDataJob shapes one row of a page. A job's deployment is the desired one with the
// unset resources filled in, or, while a deleted deployment's CronJob is being removed,
// the one last applied, as the REST API shows it.
func (r *jobsRequest) toDataJob(row store.JobRow) *dataJob {
	j := &row.Job
	out := &dataJob{
		JobName: j.Name,
		Config: &jobConfig{
			Team: j.Team, Description: j.Description,
			Schedule:                       r.schedule(j.Schedule, r.configNextRun),
			Contacts:                       toContacts(j.Contacts),
			GenerateKeytab:                 j.GenerateKeytab,
			EnableExecutionNotifications:   j.EnableExecutionNotifications,
			NotificationDelayPeriodMinutes: int32(j.NotificationDelayPeriodMinutes),
			DBDefaultType:                  j.DBDefaultType,
			SourceURL:                      render(r.h.cfg.SourceURLTemplate, j.Name, j.Team, ""),
			LogsURL:                        render(r.h.cfg.LogsURLTemplate, j.Name, j.Team, ""),
		},
		Deployments: []*deployment{},
	}
	var d job.Deployment
	dep := &deployment{ID: j.Name, Mode: "release", Contacts: out.Config.Contacts, DesiredGeneration: int32(j.Generation), req: r}
	if row.Actual != nil {
		dep.AppliedGeneration = int32(row.Actual.Generation)
	}
	switch {
	case row.Desired != nil:
		d = *row.Desired
		d.Resources = job.ResourceBounds{Default: r.h.cfg.DefaultResources}.Effective(d.Resources)
		dep.SyncStatus, dep.Message = string(d.Status), d.Message
		// A result recorded for an older generation says nothing about the current one.
		if d.StatusGeneration < j.Generation {
			dep.SyncStatus, dep.Message = string(job.StatusPending), ""
		}
		dep.LastSyncTime = formatTimePtr(d.LastSyncAt)
	case row.Actual != nil:
		a := row.Actual
		d = job.Deployment{
			JobVersion: a.JobVersion, VDKVersion: a.VDKVersion, PythonVersion: a.PythonVersion, Schedule: a.Schedule,
			Resources: a.Resources, Enabled: a.Enabled, DeployedBy: a.DeployedBy, DeployedDate: a.DeployedDate,
		}
		dep.SyncStatus = string(job.StatusDeleting)
	default:
		return out
	}
	dep.Enabled, dep.JobVersion, dep.JobPythonVersion, dep.VDKVersion = d.Enabled, d.JobVersion, d.PythonVersion, d.VDKVersion
	dep.LastDeployedDate, dep.LastDeployedBy = formatTime(d.DeployedDate), d.DeployedBy
	dep.Resources = toResources(d.Resources)
	dep.Schedule = r.schedule(d.Schedule, r.deploymentNextRun)
	dep.Status = vdkStatus(job.SyncStatus(dep.SyncStatus))
	if s := row.LastExecution.Status; s != "" {
		s = strings.ToUpper(s)
		dep.LastExecutionStatus = &s
	}
	dep.LastExecutionTime = formatTimePtr(row.LastExecution.EndTime)
	if v := row.LastExecution.DurationSeconds; v != nil {
		n := int32(*v)
		dep.LastExecutionDuration = &n
	}
	out.Deployments = []*deployment{dep}
	return out
}

// vdkStatus is VDK's deployment status: SUCCESS once synced, the error kind when the last
// attempt failed, NONE while pending or being deleted.
func vdkStatus(s job.SyncStatus) string {
	switch s {
	case job.StatusSynced:
		return "SUCCESS"
	case job.StatusUserError:
		return "USER_ERROR"
	case job.StatusPlatformError:
		return "PLATFORM_ERROR"
	default:
		return "NONE"
	}
}

// schedule shapes a cron schedule, with its next run when selected.
func (r *jobsRequest) schedule(cron string, withNextRun bool) *schedule {
	s := &schedule{ScheduleCron: cron, NextRunEpochSeconds: -1}
	if withNextRun {
		if v, ok := r.nextRun(cron); ok && v <= math.MaxInt32 { // GraphQL's Int has 32 bits: until 2038
			s.NextRunEpochSeconds = int32(v)
		}
	}
	return s
}

func (d *deployment) Executions(ctx context.Context, args executionsArgs) ([]*execution, error) {
	rows, err := d.req.executionsOf(ctx, d.ID, args)
	if err != nil {
		return nil, err
	}
	out := make([]*execution, len(rows))
	for i := range rows {
		out[i] = d.req.h.toExecution(rows[i])
	}
	return out, nil
}

func (d *deployment) SuccessfulExecutions(ctx context.Context) (int32, error) {
	c, err := d.req.executionCount(ctx, d.ID)
	return int32(c.Succeeded), err
}

func (d *deployment) FailedExecutions(ctx context.Context) (int32, error) {
	c, err := d.req.executionCount(ctx, d.ID)
	return int32(c.Failed), err
}

// resources are in cores and MiB, as in VDK. VDK's schema has the other (misspelt)
// fields and never fills them.
type resources struct {
	CPURequest            float64
	CPULimit              float64
	MemoryRequest         int32
	MemoryLimit           int32
	EmpheralStorageLimit  *int32
	EmpheralSorageRequest *int32
	NetBandwitdthLimit    *int32
}

func toResources(r job.Resources) *resources {
	return &resources{
		CPURequest: float64(r.CPURequestMillis) / 1000, CPULimit: float64(r.CPULimitMillis) / 1000,
		MemoryRequest: mib(r.MemoryRequestBytes), MemoryLimit: mib(r.MemoryLimitBytes),
	}
}

func mib(b int64) int32 { return int32(math.Round(float64(b) / (1 << 20))) }

// render fills a URL template; nil when there is none.
func render(template, jobName, team, execution string) *string {
	if template == "" {
		return nil
	}
	s := strings.NewReplacer("{job}", jobName, "{team}", team, "{execution}", execution).Replace(template)
	return &s
}

// formatTime is how the REST API writes times (encoding/json's RFC 3339).
func formatTime(t time.Time) string { return t.Format(time.RFC3339Nano) }

func formatTimePtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := formatTime(*t)
	return &s
}

type executionPage struct {
	Content    []*execution
	TotalItems int32
	TotalPages int32
}

type execution struct {
	ID                     string
	Type                   string
	JobName                string
	Status                 string
	StartTime              *string
	EndTime                *string
	StartedBy              string
	Message                string
	OpID                   string
	LogsURL                *string
	JobVersion             string
	JobSchedule            string
	JobPythonVersion       string
	VDKVersion             string
	VkdVersion             string // VDK's misspelt name of vdkVersion
	ResourcesCPURequest    *float64
	ResourcesCPULimit      *float64
	ResourcesMemoryRequest *int32
	ResourcesMemoryLimit   *int32
	DeployedDate           *string
	DeployedBy             string
	// Deployment is the snapshot of the deployment the execution ran, with VDK's fixed
	// id, mode and enabled.
	Deployment *executionDeployment
}

type executionDeployment struct {
	ID               string
	Mode             string
	Enabled          bool
	JobVersion       string
	JobPythonVersion string
	VDKVersion       string
	Schedule         *schedule
	Resources        *resources
	DeployedDate     *string
	DeployedBy       string
}

func (h *Handler) toExecution(e store.Execution) *execution {
	deployedDate := formatTimePtr(e.DeployedDate)
	return &execution{
		ID: e.ID, Type: strings.ToUpper(e.Type), JobName: e.JobName, Status: strings.ToUpper(e.Status),
		StartTime: formatTimePtr(e.StartTime), EndTime: formatTimePtr(e.EndTime),
		StartedBy: e.StartedBy, Message: e.Message, OpID: e.OpID,
		LogsURL:    render(h.cfg.LogsURLTemplate, e.JobName, "", e.ID),
		JobVersion: e.JobVersion, JobSchedule: e.JobSchedule, JobPythonVersion: e.PythonVersion,
		VDKVersion: e.VDKVersion, VkdVersion: e.VDKVersion,
		ResourcesCPURequest: cores(e.Resources.CPURequestMillis), ResourcesCPULimit: cores(e.Resources.CPULimitMillis),
		ResourcesMemoryRequest: mibPtr(e.Resources.MemoryRequestBytes), ResourcesMemoryLimit: mibPtr(e.Resources.MemoryLimitBytes),
		DeployedDate: deployedDate, DeployedBy: e.DeployedBy,
		Deployment: &executionDeployment{
			ID: "release", Mode: "release", Enabled: true,
			JobVersion: e.JobVersion, JobPythonVersion: e.PythonVersion, VDKVersion: e.VDKVersion,
			Schedule:  h.newRequest(nil).schedule(e.JobSchedule, true),
			Resources: toResources(e.Resources), DeployedDate: deployedDate, DeployedBy: e.DeployedBy,
		},
	}
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

// dateTime is the DateTime scalar: an RFC 3339 time.
type dateTime struct{ time.Time }

// ImplementsGraphQLType tells the library this type is the DateTime scalar.
func (dateTime) ImplementsGraphQLType(name string) bool { return name == "DateTime" }

// UnmarshalGraphQL reads an RFC 3339 string.
func (t *dateTime) UnmarshalGraphQL(input any) error {
	s, ok := input.(string)
	if !ok {
		return fmt.Errorf("a DateTime is an RFC 3339 string such as \"2024-01-02T15:04:05Z\", not %v", input)
	}
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("a DateTime is an RFC 3339 string such as \"2024-01-02T15:04:05Z\": %w", err)
	}
	t.Time = v
	return nil
}

// ptr returns the time of an optional DateTime.
func (t *dateTime) ptr() *time.Time {
	if t == nil {
		return nil
	}
	v := t.Time
	return &v
}

func itoa(n int) string { return strconv.Itoa(n) }
