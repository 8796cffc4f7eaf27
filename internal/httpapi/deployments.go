package httpapi

import (
	"context"
	"math"
	"net/http"
	"time"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/service"
)

// userHeader names who makes a change in auth mode none (ignored in mode oidc).
const userHeader = "X-Datajobs-User"

// deploymentResponse is VDK's DataJobDeploymentStatus as VDK reads it from its database
// (id = job name, mode = release), followed by fields VDK clients ignore: the sync state
// and what is actually deployed.
type deploymentResponse struct {
	ID               string            `json:"id"`
	Mode             string            `json:"mode"`
	Enabled          bool              `json:"enabled"`
	JobVersion       string            `json:"job_version"`
	VDKVersion       string            `json:"vdk_version"`
	PythonVersion    string            `json:"python_version"`
	Schedule         scheduleResponse  `json:"schedule"`
	Resources        resourcesResponse `json:"resources"`
	Contacts         contactsBody      `json:"contacts"`
	LastDeployedDate time.Time         `json:"last_deployed_date"`
	LastDeployedBy   string            `json:"last_deployed_by"`
	policyResponse
	// ExecutionProfile is the profile the deployment selects (docs/profiles.md).
	ExecutionProfile string `json:"execution_profile"`
	// ExecutionTarget is the execution target the deployment names (docs/targets.md);
	// absent: its team's default target.
	ExecutionTarget string `json:"execution_target,omitempty"`

	Status            job.SyncStatus  `json:"status"`
	Message           string          `json:"message"`
	DesiredGeneration int64           `json:"desired_generation"`
	AppliedGeneration int64           `json:"applied_generation"`
	LastSyncAt        *time.Time      `json:"last_sync_at"`
	Actual            *actualResponse `json:"actual"`
}

// resourcesResponse is VDK's DataJobResources: CPU in cores, memory in MiB.
type resourcesResponse struct {
	CPURequest    float64 `json:"cpu_request"`
	CPULimit      float64 `json:"cpu_limit"`
	MemoryRequest int64   `json:"memory_request"`
	MemoryLimit   int64   `json:"memory_limit"`
}

// actualResponse is what the synchronizer last applied to Kubernetes.
type actualResponse struct {
	JobVersion     string            `json:"job_version"`
	VDKVersion     string            `json:"vdk_version"`
	PythonVersion  string            `json:"python_version"`
	Schedule       scheduleResponse  `json:"schedule"`
	Resources      resourcesResponse `json:"resources"`
	Enabled        bool              `json:"enabled"`
	DeployedBy     string            `json:"deployed_by"`
	DeployedDate   time.Time         `json:"deployed_date"`
	Generation     int64             `json:"generation"`
	DeploymentHash string            `json:"deployment_hash"`
}

func toResources(r job.Resources) resourcesResponse {
	return resourcesResponse{
		CPURequest:    float64(r.CPURequestMillis) / 1000,
		CPULimit:      float64(r.CPULimitMillis) / 1000,
		MemoryRequest: int64(math.Round(float64(r.MemoryRequestBytes) / (1 << 20))),
		MemoryLimit:   int64(math.Round(float64(r.MemoryLimitBytes) / (1 << 20))),
	}
}

func toDeploymentResponse(v service.DeploymentView) deploymentResponse {
	d := v.Deployment
	out := deploymentResponse{
		ID:                v.Job.Name,
		Mode:              "release",
		Enabled:           d.Enabled,
		JobVersion:        d.JobVersion,
		VDKVersion:        d.VDKVersion,
		PythonVersion:     d.PythonVersion,
		Schedule:          toSchedule(d.Schedule, d.HashedSchedule),
		Resources:         toResources(d.Resources),
		Contacts:          toContacts(v.Job.Contacts),
		LastDeployedDate:  d.DeployedDate,
		LastDeployedBy:    d.DeployedBy,
		policyResponse:    toPolicy(d.Policy),
		ExecutionProfile:  d.ProfileName(),
		ExecutionTarget:   d.ExecutionTarget,
		Status:            v.Status,
		Message:           v.Message,
		DesiredGeneration: v.DesiredGeneration,
		AppliedGeneration: v.AppliedGeneration,
		LastSyncAt:        v.LastSyncAt,
	}
	if a := v.Actual; a != nil {
		out.Actual = &actualResponse{
			JobVersion:     a.JobVersion,
			VDKVersion:     a.VDKVersion,
			PythonVersion:  a.PythonVersion,
			Schedule:       scheduleResponse{ScheduleCron: a.Schedule},
			Resources:      toResources(a.Resources),
			Enabled:        a.Enabled,
			DeployedBy:     a.DeployedBy,
			DeployedDate:   a.DeployedDate,
			Generation:     a.Generation,
			DeploymentHash: a.DeploymentVersionSHA,
		}
	}
	return out
}

// listDeployments is GET .../deployments: [] or one deployment.
func (a *api) listDeployments(w http.ResponseWriter, r *http.Request) error {
	team, name := jobOf(r)
	views, err := a.svc.ListDeployments(r.Context(), team, name)
	return replyList(w, http.StatusOK, views, err, toDeploymentResponse)
}

// getDeployment is GET .../deployments/{deployment_id}; any id names the job's one
// deployment.
func (a *api) getDeployment(w http.ResponseWriter, r *http.Request) error {
	team, name := jobOf(r)
	v, err := a.svc.GetDeployment(r.Context(), team, name)
	return reply(w, http.StatusOK, v, err, toDeploymentResponse)
}

// deploy is POST .../deployments: 202, applied asynchronously.
func (a *api) deploy(w http.ResponseWriter, r *http.Request) error {
	return a.changeDeployment(w, r, a.svc.Deploy)
}

// patchDeployment is PATCH .../deployments/{deployment_id}: 202.
func (a *api) patchDeployment(w http.ResponseWriter, r *http.Request) error {
	return a.changeDeployment(w, r, a.svc.PatchDeployment)
}

type changeFunc func(ctx context.Context, team, name string, c job.DeploymentChange, user string) (job.Deployment, error)

func (a *api) changeDeployment(w http.ResponseWriter, r *http.Request, change changeFunc) error {
	team, name := jobOf(r)
	body, err := a.body(w, r)
	if err != nil {
		return err
	}
	c, bodyUser, err := decodeDeployment(body)
	if err != nil {
		return err
	}
	_, err = change(r.Context(), team, name, c, a.user(r, bodyUser))
	return replyStatus(w, http.StatusAccepted, err)
}

// deleteDeployment is DELETE .../deployments/{deployment_id}: 202; the CronJob goes
// asynchronously.
func (a *api) deleteDeployment(w http.ResponseWriter, r *http.Request) error {
	team, name := jobOf(r)
	return replyStatus(w, http.StatusAccepted, a.svc.DeleteDeployment(r.Context(), team, name))
}

// getProperties is GET .../properties: the job's properties object.
func (a *api) getProperties(w http.ResponseWriter, r *http.Request) error {
	team, name := jobOf(r)
	props, err := a.svc.GetProperties(r.Context(), team, name)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("ETag", service.PropertiesETag(props))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(props)
	return nil
}

// setProperties is PUT .../properties: a full replace, 204. An If-Match header
// (optional) must name the current properties' ETag, else 412 and nothing changes.
func (a *api) setProperties(w http.ResponseWriter, r *http.Request) error {
	team, name := jobOf(r)
	body, err := a.body(w, r)
	if err != nil {
		return err
	}
	err = a.svc.ReplaceProperties(r.Context(), team, name, body, service.IfMatch(r.Header.Get("If-Match")))
	return replyStatus(w, http.StatusNoContent, err)
}
