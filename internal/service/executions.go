package service

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/datajobs/datajobs/internal/job"
)

// ExecutionRequest is VDK's DataJobExecutionRequest.
type ExecutionRequest struct {
	// StartedBy names who or what asked for the run; empty means the caller.
	StartedBy string
	// Args is the raw JSON of the args object, or empty.
	Args json.RawMessage
	// RerunOf names an execution of the same job to run again: with its arguments and its
	// logical time (the request then has no Args of its own).
	RerunOf string
}

// StartExecution records a manual execution of the job name of team, submitted, for the
// leader to run; it needs a deployment (an enabled one or not: VDK runs disabled ones on
// demand) and no other execution of the job under way. caller is the identity of the
// request, opID its operation id.
func (s *Service) StartExecution(ctx context.Context, team, name string, req ExecutionRequest, caller, opID string) (job.Execution, error) {
	args, err := job.ValidateArgs(req.Args)
	if err != nil {
		return job.Execution{}, err
	}
	var rerun job.Execution
	if req.RerunOf != "" {
		if args != nil {
			return job.Execution{}, job.Invalid("args", "absent with rerun_of (a re-run takes the arguments of the execution it repeats)", string(req.Args))
		}
		if rerun, err = s.store.GetJobExecution(ctx, team, name, req.RerunOf); err != nil {
			return job.Execution{}, err
		}
		args = rerun.Args
	}
	startedBy := cmp.Or(req.StartedBy, caller)
	if err := job.ValidateText("started_by", startedBy, 253); err != nil {
		return job.Execution{}, err
	}
	now := s.now()
	return s.store.StartExecution(ctx, team, name, func(st job.JobState) (job.NewExecution, error) {
		var snap job.Deployment
		switch {
		case st.Actual != nil:
			snap = st.Actual.Snapshot()
			if st.Desired == nil {
				return job.NewExecution{}, job.DeploymentNotFound(name) // being deleted
			}
		case st.Desired != nil:
			if err := runnable(st); err != nil {
				return job.NewExecution{}, err
			}
			snap = *st.Desired
			snap.Resources = s.cfg.Resources.Effective(snap.Resources)
		default:
			return job.NewExecution{}, job.DeploymentNotFound(name)
		}
		return job.NewExecution{
			ID: name + "-" + strconv.FormatInt(now.Unix(), 10), OpID: opID, StartedBy: startedBy, Args: args,
			Snapshot: snap, Start: now, LogicalTime: rerun.LogicalTime, RerunOf: rerun.ID,
		}, nil
	})
}

// runnable refuses at once a start that could only fail minutes later: the job has no
// CronJob yet (a Job is created from it) and the synchronizer has said why it cannot
// create one for the current deployment: its image is being built, or the deployment
// failed. A deployment merely not synced yet is accepted (the leader waits for its
// CronJob); a job with a CronJob runs its last good image, as its schedule would.
func runnable(st job.JobState) error {
	d := st.Desired
	if st.Actual != nil || d.StatusGeneration != st.Job.Generation {
		return nil
	}
	var why string
	switch d.Status {
	case job.StatusBuilding:
		why = "Its deployment has no CronJob yet: the image of version " + d.JobVersion + " is still being built (" + d.Message + ")."
	case job.StatusUserError, job.StatusPlatformError:
		why = "Its deployment has no CronJob: the deployment is " + string(d.Status) + ": " + d.Message
	default:
		return nil
	}
	return job.NewError(job.KindConflict,
		fmt.Sprintf("The data job %q cannot be executed now.", st.Job.Name),
		why,
		"No execution was started.",
		"Wait until the deployment's status is synced (vdk show), or fix what its message says and deploy again; then start the execution.",
	)
}

// ListExecutions returns the executions of the job name of team, newest first, with one
// of statuses when any are given.
func (s *Service) ListExecutions(ctx context.Context, team, name string, statuses []string) ([]job.Execution, error) {
	return s.store.ListJobExecutions(ctx, team, name, statuses)
}

// GetExecution returns the execution id of the job name of team.
func (s *Service) GetExecution(ctx context.Context, team, name, id string) (job.Execution, error) {
	return s.store.GetJobExecution(ctx, team, name, id)
}

// CancelExecution asks the leader to cancel the execution id of the job name of team; it
// becomes cancelled once Kubernetes confirms its Job gone. A finished one is a 400.
func (s *Service) CancelExecution(ctx context.Context, team, name, id, caller string) (job.Execution, error) {
	return s.store.CancelExecution(ctx, team, name, id, caller)
}

// LogReader reads the log of the pod of a running execution from the cluster of its
// execution target, bounded in time and bytes. The server injects the Kubernetes
// implementation; nil means only stored logs are served.
type LogReader interface {
	// ExecutionLog returns the log of the latest pod of the Job named id in target (its
	// namespace and cluster), its last tailLines lines when tailLines > 0; found is false
	// when the Job has no pod (yet, or any more).
	ExecutionLog(ctx context.Context, target job.Target, id string, tailLines int) (text string, found bool, err error)
}

// ExecutionLogs returns the log of the execution id of the job name of team: the copy the
// leader stored when it finished, or, while none is stored, what its pod has printed so
// far; the last tailLines lines when tailLines > 0. A finished execution whose log the
// leader was still to read (pending) when its pod went is a LogNotKept error, never "".
func (s *Service) ExecutionLogs(ctx context.Context, team, name, id string, tailLines int) (string, error) {
	target, stored, err := s.store.ExecutionLog(ctx, team, name, id)
	if err != nil {
		return "", err
	}
	if stored != nil && !stored.Pending {
		return tail(stored.Logs, tailLines), nil
	}
	if s.cfg.Logs == nil {
		return "", nil
	}
	text, found, err := s.cfg.Logs.ExecutionLog(ctx, target, id, tailLines)
	if err != nil {
		return "", job.Unavailable("Kubernetes API (pod logs)", err)
	}
	if found || stored == nil {
		return text, nil // a run under way, or one that ended without a pod: nothing printed
	}
	// Pending, and the pod is gone: the leader may have kept the log just before it went.
	if _, stored, err = s.store.ExecutionLog(ctx, team, name, id); err != nil {
		return "", err
	}
	if stored != nil && !stored.Pending {
		return tail(stored.Logs, tailLines), nil
	}
	return "", job.LogNotKept(team, name, id)
}

// tail returns the last n lines of s (all of it when n <= 0).
func tail(s string, n int) string {
	if n <= 0 {
		return s
	}
	end := len(s)
	if strings.HasSuffix(s, "\n") {
		end--
	}
	for i := end - 1; i >= 0; i-- {
		if s[i] == '\n' {
			n--
			if n == 0 {
				return s[i+1:]
			}
		}
	}
	return s
}

// LogsURL renders the logs_url of an execution from the configured template, or nil when
// there is none. Placeholders: {job_name}, {team}, {execution_id}, {op_id},
// {start_time} and {end_time} (RFC 3339, empty while unknown), each URL-escaped.
func (s *Service) LogsURL(team string, e job.Execution) *string {
	if s.cfg.LogsURLTemplate == "" {
		return nil
	}
	ts := func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return t.UTC().Format(time.RFC3339)
	}
	r := strings.NewReplacer(
		"{job_name}", url.QueryEscape(e.JobName), "{team}", url.QueryEscape(team),
		"{execution_id}", url.QueryEscape(e.ID), "{op_id}", url.QueryEscape(e.OpID),
		"{start_time}", url.QueryEscape(ts(e.StartTime)), "{end_time}", url.QueryEscape(ts(e.EndTime)),
	)
	u := r.Replace(s.cfg.LogsURLTemplate)
	return &u
}
