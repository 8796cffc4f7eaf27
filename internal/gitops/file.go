// Package gitops is jobs as code (issue 46): the file a team keeps in Git (datajobs.yaml),
// parsed strictly into the domain's values, and the plan that takes the team's current
// state to the file's. It does no I/O: the service reads the state, asks for the plan and
// applies it in one transaction through the store's ordinary writes.
package gitops

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"sigs.k8s.io/yaml"

	"github.com/datajobs/datajobs/internal/job"
	pl "github.com/datajobs/datajobs/internal/pipeline"
	"github.com/datajobs/datajobs/internal/trigger"
)

// APIVersion is the only version of the file there is.
const APIVersion = "datajobs.io/v1"

// File is a team's datajobs.yaml. Its types are the JSON Schema's (Schema), so the file
// and its schema cannot disagree.
type File struct {
	// APIVersion must be APIVersion.
	APIVersion string `json:"apiVersion" jsonschema:"required"`
	// Team is the team whose objects the file holds: the apply's path team.
	Team string `json:"team" jsonschema:"required"`
	// Jobs are the team's data jobs, each with its deployment.
	Jobs []Job `json:"jobs,omitempty"`
	// Pipelines are the team's pipelines (docs/pipelines.md).
	Pipelines []Pipeline `json:"pipelines,omitempty"`
	// Triggers are the team's triggers (docs/triggers.md).
	Triggers []Trigger `json:"triggers,omitempty"`
	// Webhooks are the team's notification webhooks (docs/api.md, "Webhooks").
	Webhooks []Webhook `json:"webhooks,omitempty"`
}

// Job is one data job: its configuration as the API's DataJob body, and its deployment.
type Job struct {
	JobName     string     `json:"job_name" jsonschema:"required"`
	Description string     `json:"description,omitempty"`
	Config      *JobConfig `json:"config,omitempty"`
	// Deployment is the job's deployment; absent: the job is not deployed.
	Deployment *Deployment `json:"deployment,omitempty"`
}

// JobConfig is the API's DataJob config; an absent field takes the API's default.
type JobConfig struct {
	DBDefaultType                  string    `json:"db_default_type,omitempty"`
	Contacts                       *Contacts `json:"contacts,omitempty"`
	Schedule                       *Schedule `json:"schedule,omitempty"`
	GenerateKeytab                 *bool     `json:"generate_keytab,omitempty"`
	EnableExecutionNotifications   *bool     `json:"enable_execution_notifications,omitempty"`
	NotificationDelayPeriodMinutes *int      `json:"notification_delay_period_minutes,omitempty"`
}

// Contacts are the job's notification recipients.
type Contacts struct {
	NotifiedOnJobFailureUserError     []string `json:"notified_on_job_failure_user_error,omitempty"`
	NotifiedOnJobFailurePlatformError []string `json:"notified_on_job_failure_platform_error,omitempty"`
	NotifiedOnJobSuccess              []string `json:"notified_on_job_success,omitempty"`
	NotifiedOnJobDeploy               []string `json:"notified_on_job_deploy,omitempty"`
}

// Schedule is a cron schedule, as the API spells it.
type Schedule struct {
	ScheduleCron string `json:"schedule_cron"`
}

// Deployment is a job's deployment as the API's body, declarative: an absent field is
// the default a first deployment takes, not the value stored before.
type Deployment struct {
	// JobVersion is an uploaded version of the job's sources; give it or Source.
	JobVersion string `json:"job_version,omitempty"`
	// Source is the folder of the job's sources, relative to the file: `datajobs apply -f`
	// packs it as vdk deploy does, stages it and sends the file with its JobVersion beside
	// it. The service never reads a local path: it refuses a Source without a JobVersion,
	// and an apply that writes a JobVersion of a Source neither staged nor the job's.
	Source        string `json:"source,omitempty"`
	Enabled       *bool  `json:"enabled,omitempty"`
	PythonVersion string `json:"python_version,omitempty"`
	VDKVersion    string `json:"vdk_version,omitempty"`
	// Schedule is the deployment's own schedule; absent: the job's.
	Schedule  *Schedule  `json:"schedule,omitempty"`
	Resources *Resources `json:"resources,omitempty"`
	// PolicyChange is the run policy; an absent field takes the deployed version's
	// config.ini, then the default.
	job.PolicyChange
}

// Resources are a deployment's resources: CPU in cores, memory in MiB (the API's units).
type Resources struct {
	CPURequest    float64 `json:"cpu_request,omitempty"`
	CPULimit      float64 `json:"cpu_limit,omitempty"`
	MemoryRequest float64 `json:"memory_request,omitempty"`
	MemoryLimit   float64 `json:"memory_limit,omitempty"`
}

// Pipeline is one pipeline: its name and the body of its PUT.
type Pipeline struct {
	Name string `json:"name" jsonschema:"required"`
	pl.Body
}

// Trigger is one trigger: the body of its POST (docs/triggers.md).
type Trigger = trigger.Spec

// rawFile is File with its objects left undecoded, so that each is decoded alone and its
// error names it.
type rawFile struct {
	APIVersion string            `json:"apiVersion"`
	Team       string            `json:"team"`
	Jobs       []json.RawMessage `json:"jobs"`
	Pipelines  []json.RawMessage `json:"pipelines"`
	Triggers   []json.RawMessage `json:"triggers"`
	Webhooks   []json.RawMessage `json:"webhooks"`
}

// Parse reads a file, YAML or JSON, strictly: an unknown field anywhere, a second object
// of one name, a wrong apiVersion or a team other than team is an error (KindInvalid)
// naming the object and what is wrong with it.
func Parse(team string, data []byte) (File, error) {
	js := bytes.TrimSpace(data)
	fromYAML := len(js) == 0 || js[0] != '{'
	if fromYAML {
		var err error
		if js, err = yaml.YAMLToJSON(data); err != nil {
			return File{}, invalidFile("YAML or JSON", err)
		}
	}
	var raw rawFile
	if err := job.DecodeStrict(js, &raw); err != nil {
		return File{}, invalidFile("a datajobs.yaml object", err)
	}
	if fromYAML {
		for i, t := range raw.Triggers {
			raw.Triggers[i] = bareOn(t)
		}
	}
	f := File{APIVersion: raw.APIVersion, Team: raw.Team}
	if f.APIVersion != APIVersion {
		return File{}, job.Invalid("apiVersion", strconv.Quote(APIVersion), strconv.Quote(f.APIVersion))
	}
	if f.Team != team {
		return File{}, job.Invalid("team", "the team of the path ("+team+")", strconv.Quote(f.Team))
	}
	var err error
	if f.Jobs, err = decodeEach(raw.Jobs, "jobs", "job_name", func(j Job) string { return j.JobName }); err != nil {
		return File{}, err
	}
	if f.Pipelines, err = decodeEach(raw.Pipelines, "pipelines", "name", func(p Pipeline) string { return p.Name }); err != nil {
		return File{}, err
	}
	if f.Triggers, err = decodeEach(raw.Triggers, "triggers", "name", func(t Trigger) string { return t.Name }); err != nil {
		return File{}, err
	}
	if f.Webhooks, err = decodeEach(raw.Webhooks, "webhooks", "name", func(w Webhook) string { return w.Name }); err != nil {
		return File{}, err
	}
	return f, nil
}

// bareOn is the trigger t with its key "true" named "on" again: YAML 1.1 (the parser's)
// reads a bare on: as the boolean true, as GitHub Actions' workflows know, and a trigger
// has no field "true".
func bareOn(t json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(t, &m) != nil || m["true"] == nil || m["on"] != nil {
		return t
	}
	m["on"] = m["true"]
	delete(m, "true")
	out, err := json.Marshal(m)
	if err != nil {
		return t
	}
	return out
}

// decodeEach decodes the objects of list strictly, each named by its key field, and
// refuses a name given twice.
func decodeEach[T any](raws []json.RawMessage, list, key string, name func(T) string) ([]T, error) {
	out := make([]T, 0, len(raws))
	seen := map[string]int{}
	for i, r := range raws {
		var v T
		if err := job.DecodeStrict(r, &v); err != nil {
			var peek map[string]any
			_ = json.Unmarshal(r, &peek)
			n, _ := peek[key].(string)
			return nil, Invalid(list, i, n, err)
		}
		n := name(v)
		if j, ok := seen[n]; ok {
			return nil, Invalid(list, i, n, fmt.Errorf("the name is also that of %s[%d]", list, j))
		}
		seen[n] = i
		out = append(out, v)
	}
	return out, nil
}

// Invalid is the error of the object list[i] named name: err says what is wrong with it
// (a domain error's what and why, or a decoding error).
func Invalid(list string, i int, name string, err error) *job.Error {
	why := err.Error()
	if de, ok := errors.AsType[*job.Error](err); ok {
		why = de.What + " " + de.Why
	}
	return &job.Error{
		Kind:            job.KindInvalid,
		What:            fmt.Sprintf("The object %s[%d] (%q) of the file is not valid.", list, i, name),
		Why:             why,
		Consequences:    "Nothing was applied.",
		Countermeasures: "Correct the object and apply the file again (the schema: GET /data-jobs/schema/datajobs.yaml.json).",
		Err:             err,
	}
}

func invalidFile(want string, err error) *job.Error {
	e := job.Invalid("file", want, "not one: "+err.Error())
	e.Err = err
	return e
}
