package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/datajobs/datajobs/internal/gitops"
	"github.com/datajobs/datajobs/internal/job"
)

// readBody reads the whole request body, at most limit bytes.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, bodyTooLarge(limit)
	}
	if job.KindOf(err) != 0 { // a paced body that was too slow says so itself
		return nil, err
	}
	if err != nil {
		return nil, malformedBody(err)
	}
	return body, nil
}

// decodeJSON decodes one JSON value from body into v. An empty body leaves v as it is
// (VDK's deployment bodies are optional); unknown fields are ignored; anything after the
// value is an error.
func decodeJSON(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return malformedBody(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return malformedBody(errors.New("unexpected data after the JSON value"))
	}
	return nil
}

// jobRequest is VDK's DataJob as a request: the job of a jobs-as-code file, with a team.
type jobRequest struct {
	gitops.Job
	Team string `json:"team"`
}

// contactsBody is VDK's DataJobContacts.
type contactsBody struct {
	NotifiedOnJobFailureUserError     []string `json:"notified_on_job_failure_user_error"`
	NotifiedOnJobFailurePlatformError []string `json:"notified_on_job_failure_platform_error"`
	NotifiedOnJobSuccess              []string `json:"notified_on_job_success"`
	NotifiedOnJobDeploy               []string `json:"notified_on_job_deploy"`
}

type scheduleRequest struct {
	ScheduleCron *string `json:"schedule_cron"`
}

// decodeJob decodes a DataJob body into a job, with VDK's defaults for absent fields.
// The team and name are left as sent (empty when absent): the service fills them.
func decodeJob(body []byte) (job.Job, error) {
	var req jobRequest
	if err := decodeJSON(body, &req); err != nil {
		return job.Job{}, err
	}
	return req.Domain(req.Team), nil
}

// deploymentRequest is VDK's DataJobDeployment as a request. mode, id, deployed_date and
// contacts are read by VDK's clients but ignored by the server, here too.
type deploymentRequest struct {
	JobVersion    *string           `json:"job_version"`
	VDKVersion    *string           `json:"vdk_version"`
	PythonVersion *string           `json:"python_version"`
	Enabled       *bool             `json:"enabled"`
	DeployedBy    string            `json:"deployed_by"`
	Schedule      *scheduleRequest  `json:"schedule"`
	Resources     *resourcesRequest `json:"resources"`
	// The run policy: datajobs extensions that VDK clients never send (an absent field
	// keeps the stored value).
	job.PolicyChange
}

type resourcesRequest struct {
	CPURequest    amount `json:"cpu_request"`
	CPULimit      amount `json:"cpu_limit"`
	MemoryRequest amount `json:"memory_request"`
	MemoryLimit   amount `json:"memory_limit"`
}

// amount is a resource amount as sent: a JSON number in VDK's unit (cores or MiB) or a
// Kubernetes quantity string ("500m", "1Gi"). null or absent is not set.
type amount struct {
	set    bool
	number bool
	text   string
}

func (a *amount) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case string(b) == "null":
		*a = amount{}
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*a = amount{set: true, text: s}
	case len(b) > 0 && (b[0] == '-' || (b[0] >= '0' && b[0] <= '9')):
		*a = amount{set: true, number: true, text: string(b)}
	default:
		return errors.New("a resource must be a number or a quantity string")
	}
	return nil
}

// decodeDeployment decodes a DataJobDeployment body into a change, and returns the
// deployed_by it names (empty when absent).
func decodeDeployment(body []byte) (job.DeploymentChange, string, error) {
	var req deploymentRequest
	if err := decodeJSON(body, &req); err != nil {
		return job.DeploymentChange{}, "", err
	}
	c := job.DeploymentChange{
		JobVersion:    req.JobVersion,
		VDKVersion:    req.VDKVersion,
		PythonVersion: req.PythonVersion,
		Enabled:       req.Enabled,
		Policy:        req.PolicyChange,
	}
	if req.Schedule != nil {
		c.Schedule = req.Schedule.ScheduleCron
	}
	if res := req.Resources; res != nil {
		var err error
		if c.Resources.CPURequestMillis, err = cpu("resources.cpu_request", res.CPURequest); err != nil {
			return job.DeploymentChange{}, "", err
		}
		if c.Resources.CPULimitMillis, err = cpu("resources.cpu_limit", res.CPULimit); err != nil {
			return job.DeploymentChange{}, "", err
		}
		if c.Resources.MemoryRequestBytes, err = memory("resources.memory_request", res.MemoryRequest); err != nil {
			return job.DeploymentChange{}, "", err
		}
		if c.Resources.MemoryLimitBytes, err = memory("resources.memory_limit", res.MemoryLimit); err != nil {
			return job.DeploymentChange{}, "", err
		}
	}
	return c, req.DeployedBy, nil
}

// cpu converts an amount to millicores; 0 means not set.
func cpu(field string, a amount) (int64, error) {
	return a.convert(field, "cores", job.CPUFromCores, job.CPUFromQuantity)
}

// memory converts an amount to bytes; 0 means not set.
func memory(field string, a amount) (int64, error) {
	return a.convert(field, "MiB", job.MemoryFromMiB, job.MemoryFromQuantity)
}

// convert converts a resource amount with fromNumber when it is a number in VDK's unit
// (named unit), else with fromQuantity; 0 means not set.
func (a amount) convert(
	field, unit string, fromNumber func(string, float64) (int64, error), fromQuantity func(string, string) (int64, error),
) (int64, error) {
	switch {
	case !a.set:
		return 0, nil
	case a.number:
		n, err := strconv.ParseFloat(a.text, 64)
		if err != nil {
			return 0, job.Invalid(field, "a positive number of "+unit, a.text)
		}
		return fromNumber(field, n)
	default:
		return fromQuantity(field, a.text)
	}
}

// decodeStrictJSON is job.DecodeStrict as a request's error: a misspelt or foreign field
// of an admin's body is a 400 naming it, not silently dropped.
func decodeStrictJSON(body []byte, v any) error {
	if err := job.DecodeStrict(body, v); err != nil {
		return malformedBody(err)
	}
	return nil
}
