package httpapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/service"
)

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
	// Extensions VDK clients ignore: a manual start's arguments (null: none), and how a
	// final execution ended (the main container's exit code, null when it never exited,
	// and Kubernetes' reason).
	Args              json.RawMessage `json:"args"`
	ExitCode          *int32          `json:"exit_code"`
	TerminationReason string          `json:"termination_reason"`
	// What the run was started for: the schedule time a catch-up or backfill run stands
	// for, its backfill, and the execution it re-runs (null when none).
	LogicalTime *time.Time `json:"logical_time"`
	BackfillID  *int64     `json:"backfill_id"`
	RerunOf     *string    `json:"rerun_of"`
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

// executionBody converts executions of team's jobs for an answer (logs_url names the team).
func (a *api) executionBody(team string) func(job.Execution) executionResponse {
	return func(e job.Execution) executionResponse {
		return executionResponse{
			ID: e.ID, JobName: e.JobName, Status: e.Status, Type: e.Type,
			StartTime: e.StartTime, EndTime: e.EndTime, StartedBy: e.StartedBy, LogsURL: a.svc.LogsURL(team, e),
			Message: e.Message, OpID: e.OpID,
			Args: argsJSON(e.Args), ExitCode: e.ExitCode, TerminationReason: e.TerminationReason,
			LogicalTime: e.LogicalTime, BackfillID: nonZero(e.BackfillID), RerunOf: nonZero(e.RerunOf),
			Deployment: executionDeploymentResponse{
				ID: "release", Mode: "release", Enabled: true,
				VDKVersion: e.VDKVersion, JobVersion: e.JobVersion, PythonVersion: e.PythonVersion,
				Schedule: scheduleResponse{ScheduleCron: e.JobSchedule}, Resources: toResources(e.Resources),
				DeployedBy: e.DeployedBy, DeployedDate: e.DeployedDate,
			},
		}
	}
}

// listExecutions is GET .../executions (and .../deployments/{id}/executions, the same
// list): every execution of the job, newest first, optionally only those with the
// statuses of execution_status (repeated or comma-separated). An unknown status is 400,
// not VDK's 404.
func (a *api) listExecutions(w http.ResponseWriter, r *http.Request) error {
	team, name := jobOf(r)
	statuses, err := executionStatuses(r.URL.Query()["execution_status"])
	if err != nil {
		return err
	}
	execs, err := a.svc.ListExecutions(r.Context(), team, name, statuses)
	return replyList(w, http.StatusOK, execs, err, a.executionBody(team))
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
			if !slices.Contains(job.ExecutionStatuses(), s) {
				return nil, job.Invalid("execution_status", "one of "+strings.Join(job.ExecutionStatuses(), ", "), strconv.Quote(s))
			}
			out = append(out, s)
		}
	}
	return out, nil
}

func executionLocation(team, name, id string) string {
	return jobLocation(team, name) + "/executions/" + url.PathEscape(id)
}

// executionRequest is VDK's DataJobExecutionRequest.
type executionRequest struct {
	StartedBy string          `json:"started_by"`
	Args      json.RawMessage `json:"args"`
	// RerunOf (a datajobs extension) starts the run again of an execution of the job, with
	// its arguments and logical time.
	RerunOf string `json:"rerun_of"`
}

// startExecution is POST .../deployments/{id}/executions: 202 with the execution and its
// Location; the leader creates the Kubernetes Job. The deployment id is not checked (a
// job has one deployment), as in VDK.
func (a *api) startExecution(w http.ResponseWriter, r *http.Request) error {
	team, name := jobOf(r)
	req, err := decodeBody[executionRequest](a, w, r)
	if err != nil {
		return err
	}
	e, err := a.svc.StartExecution(r.Context(), team, name,
		service.ExecutionRequest{Args: req.Args, RerunOf: req.RerunOf}, a.startedBy(r, req.StartedBy), opID(r.Context()))
	if err != nil {
		return err
	}
	w.Header().Set("Location", executionLocation(team, name, e.ID))
	writeJSON(w, http.StatusAccepted, a.executionBody(team)(e))
	return nil
}

// getExecution is GET .../executions/{execution_id}.
func (a *api) getExecution(w http.ResponseWriter, r *http.Request) error {
	team, name, id := executionOf(r)
	e, err := a.svc.GetExecution(r.Context(), team, name, id)
	return reply(w, http.StatusOK, e, err, a.executionBody(team))
}

// cancelExecution is DELETE .../executions/{execution_id}: 200 once the cancel is
// recorded; the execution turns cancelled when Kubernetes confirms its Job gone.
func (a *api) cancelExecution(w http.ResponseWriter, r *http.Request) error {
	team, name, id := executionOf(r)
	e, err := a.svc.CancelExecution(r.Context(), team, name, id, a.user(r, ""))
	return reply(w, http.StatusOK, e, err, a.executionBody(team))
}

// logsResponse is VDK's DataJobExecutionLogs.
type logsResponse struct {
	Logs string `json:"logs"`
}

// executionLogs is GET .../executions/{execution_id}/logs?tail_lines=N: the last N lines
// (LogTailLines without tail_lines, all that is kept for N <= 0), in a log-read slot.
func (a *api) executionLogs(w http.ResponseWriter, r *http.Request) error {
	team, name, id := executionOf(r)
	tail := a.cfg.LogTailLines
	if v := r.URL.Query().Get("tail_lines"); v != "" {
		var err error
		if tail, err = strconv.Atoi(v); err != nil {
			return job.Invalid("tail_lines", "an integer", strconv.Quote(v))
		}
	}
	logs, err := a.svc.ExecutionLogs(r.Context(), team, name, id, tail)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, logsResponse{Logs: logs})
	return nil
}

// nonZero is &v, or nil for the zero value (a JSON null).
func nonZero[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}

// argsJSON is an execution's stored arguments, null when there are none.
func argsJSON(b []byte) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}
