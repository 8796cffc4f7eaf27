package httpapi

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/store"
)

// ExecutionLister lists the executions of a job; the store implements it.
type ExecutionLister interface {
	// ListJobExecutions returns the executions of the job name of team with one of
	// statuses (any when empty), newest first; a job that does not exist is not found.
	ListJobExecutions(ctx context.Context, team, name string, statuses []string) ([]store.Execution, error)
}

// executionResponse is VDK's DataJobExecution.
type executionResponse struct {
	ID         string                      `json:"id"`
	JobName    string                      `json:"job_name"`
	Status     string                      `json:"status"`
	Type       string                      `json:"type"`
	StartTime  *time.Time                  `json:"start_time"`
	EndTime    *time.Time                  `json:"end_time"`
	StartedBy  string                      `json:"started_by"`
	LogsURL    *string                     `json:"logs_url"`
	Message    string                      `json:"message"`
	OpID       string                      `json:"op_id"`
	Deployment executionDeploymentResponse `json:"deployment"`
}

// executionDeploymentResponse is the snapshot of the deployment an execution ran, with
// VDK's fixed id, mode and enabled.
type executionDeploymentResponse struct {
	ID            string            `json:"id"`
	Mode          string            `json:"mode"`
	Enabled       bool              `json:"enabled"`
	VDKVersion    string            `json:"vdk_version"`
	JobVersion    string            `json:"job_version"`
	PythonVersion string            `json:"python_version"`
	Schedule      scheduleResponse  `json:"schedule"`
	Resources     resourcesResponse `json:"resources"`
	DeployedBy    string            `json:"deployed_by"`
	DeployedDate  *time.Time        `json:"deployed_date"`
}

func toExecutionResponse(e store.Execution) executionResponse {
	return executionResponse{
		ID: e.ID, JobName: e.JobName, Status: e.Status, Type: e.Type,
		StartTime: e.StartTime, EndTime: e.EndTime, StartedBy: e.StartedBy,
		Message: e.Message, OpID: e.OpID,
		Deployment: executionDeploymentResponse{
			ID: "release", Mode: "release", Enabled: true,
			VDKVersion: e.VDKVersion, JobVersion: e.JobVersion, PythonVersion: e.PythonVersion,
			Schedule: scheduleResponse{ScheduleCron: e.JobSchedule}, Resources: toResources(e.Resources),
			DeployedBy: e.DeployedBy, DeployedDate: e.DeployedDate,
		},
	}
}

// listExecutions is GET .../executions (and .../deployments/{id}/executions, the same
// list): every execution of the job, newest first, optionally only those with the
// statuses of execution_status (repeated or comma-separated). An unknown status is 400,
// not VDK's 404.
func (a *api) listExecutions(w http.ResponseWriter, r *http.Request) {
	team, name, err := pathJob(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	statuses, err := executionStatuses(r.URL.Query()["execution_status"])
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	execs, err := a.cfg.Executions.ListJobExecutions(r.Context(), team, name, statuses)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	out := make([]executionResponse, 0, len(execs))
	for _, e := range execs {
		out = append(out, toExecutionResponse(e))
	}
	writeJSON(w, http.StatusOK, out)
}

// executionStatuses parses the execution_status parameters, ignoring case.
func executionStatuses(params []string) ([]string, error) {
	var out []string
	for _, p := range params {
		for s := range strings.SplitSeq(p, ",") {
			s = strings.ToLower(strings.TrimSpace(s))
			if s == "" {
				continue
			}
			if !slices.Contains(store.ExecutionStatuses(), s) {
				return nil, job.Invalid("execution_status", "one of "+strings.Join(store.ExecutionStatuses(), ", "), strconv.Quote(s))
			}
			out = append(out, s)
		}
	}
	return out, nil
}
