// Package trigger is the domain of triggers (issue 42): what starts a job or a pipeline
// when something happens (a signed inbound call, another job's or pipeline's outcome, an
// object landing in storage), the spec a POST stores and its validation, the signature of
// an invocation, the S3 event-notification body, and the pure rule that turns a trigger's
// pending events into runs (Plan). It does no I/O: the store keeps the rows and the
// leader's firer applies what Plan decides.
package trigger

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/datajobs/datajobs/internal/job"
	pl "github.com/datajobs/datajobs/internal/pipeline"
	"github.com/datajobs/datajobs/internal/secrets"
)

// Bounds of a trigger.
const (
	// MaxWindowSeconds bounds coalesce.seconds: events wait at most this long for a run.
	MaxWindowSeconds = 3600
	// DefaultEventsPerMinute is max_events_per_minute when the spec has none.
	DefaultEventsPerMinute = 600
	// MaxEventsPerMinute bounds max_events_per_minute.
	MaxEventsPerMinute = 12000
	// MaxPerTeam bounds the triggers of one team.
	MaxPerTeam = 100
	// maxPrefix bounds an object trigger's prefix and bucket, in bytes (S3's key limit).
	maxPrefix = 1024
)

// The kinds of triggers (on.kind).
const (
	Webhook = "webhook"
	Outcome = "outcome"
	Object  = "object"
)

// The coalescing modes (coalesce.mode).
const (
	// Each starts one run per event.
	Each = "each"
	// Window starts one run for the events received within seconds of the first pending
	// one, listing them.
	Window = "window"
)

// Target is what a trigger starts: a job's manual execution or a pipeline's run, of the
// trigger's own team.
type Target struct {
	JobName      string `json:"job_name,omitempty"`
	PipelineName string `json:"pipeline_name,omitempty"`
}

// Name is the target's job or pipeline name.
func (t Target) Name() string { return cmp.Or(t.JobName, t.PipelineName) }

// IsPipeline reports whether the target is a pipeline.
func (t Target) IsPipeline() bool { return t.PipelineName != "" }

// On is what a trigger listens to.
type On struct {
	Kind string `json:"kind"`
	// Outcome triggers: the job or pipeline whose final statuses fire it, of Team.
	JobName      string   `json:"job_name,omitempty"`
	PipelineName string   `json:"pipeline_name,omitempty"`
	Team         string   `json:"team,omitempty"`
	Statuses     []string `json:"statuses,omitempty"`
	// Object triggers: the bucket and the prefix of the keys that fire it.
	Bucket string `json:"bucket,omitempty"`
	Prefix string `json:"prefix,omitempty"`
}

// Coalesce is how a trigger's events become runs.
type Coalesce struct {
	Mode    string `json:"mode"`
	Seconds int    `json:"seconds,omitempty"`
}

// Spec is a trigger as a POST stores it, defaults applied.
type Spec struct {
	Name               string          `json:"name"`
	Target             Target          `json:"target"`
	On                 On              `json:"on"`
	Coalesce           Coalesce        `json:"coalesce"`
	Arguments          json.RawMessage `json:"arguments,omitempty"`
	MaxEventsPerMinute int             `json:"max_events_per_minute"`
}

// Signed reports whether the trigger is invoked by signed calls (webhook and object
// kinds): those have a signing secret and an invocation URL.
func (s Spec) Signed() bool { return s.On.Kind != Outcome }

// Trigger is a stored trigger.
type Trigger struct {
	ID        string
	Team      string
	Spec      Spec
	CreatedBy string
	CreatedAt time.Time
	// Secret is the signing secret, open: set only on the answer of the create.
	Secret []byte
	// LastEvents are its newest events, newest first (lists and the console).
	LastEvents []Event
}

// Parse decodes and validates the POST body of a trigger of team: defaults applied, each
// broken rule a 400 naming its field. Whether the target and the upstream exist, and the
// grant of another team's upstream, are the store's to check.
func Parse(team string, raw []byte) (Spec, error) {
	var s Spec
	if err := job.DecodeStrict(raw, &s); err != nil {
		return Spec{}, job.Invalid("body", "a JSON object describing a trigger", "not one: "+err.Error())
	}
	return s, s.validate(team)
}

func (s *Spec) validate(team string) error {
	if err := pl.ValidateName("name", s.Name); err != nil {
		return err
	}
	if err := validateTarget(s.Target); err != nil {
		return err
	}
	if err := s.validateOn(team); err != nil {
		return err
	}
	s.Coalesce.Mode = cmp.Or(s.Coalesce.Mode, Each)
	switch s.Coalesce.Mode {
	case Each:
		if s.Coalesce.Seconds != 0 {
			return job.Invalid("coalesce.seconds", "absent with mode each", s.Coalesce.Seconds)
		}
	case Window:
		if s.Coalesce.Seconds < 1 || s.Coalesce.Seconds > MaxWindowSeconds {
			return job.Invalid("coalesce.seconds", fmt.Sprintf("from 1 to %d with mode window", MaxWindowSeconds), s.Coalesce.Seconds)
		}
	default:
		return job.Invalid("coalesce.mode", "each or window", fmt.Sprintf("%q", s.Coalesce.Mode))
	}
	args, err := job.ValidateArgs(s.Arguments)
	if err != nil {
		return job.WithParam(err, "arguments")
	}
	s.Arguments = args
	s.MaxEventsPerMinute = cmp.Or(s.MaxEventsPerMinute, DefaultEventsPerMinute)
	if s.MaxEventsPerMinute < 1 || s.MaxEventsPerMinute > MaxEventsPerMinute {
		return job.Invalid("max_events_per_minute", fmt.Sprintf("from 1 to %d", MaxEventsPerMinute), s.MaxEventsPerMinute)
	}
	return nil
}

func validateTarget(t Target) error {
	switch {
	case t.JobName != "" && t.PipelineName != "":
		return job.Invalid("target", "one of job_name or pipeline_name", "both")
	case t.JobName != "":
		return pl.ValidateName("target.job_name", t.JobName)
	case t.PipelineName != "":
		return pl.ValidateName("target.pipeline_name", t.PipelineName)
	}
	return job.Invalid("target", "an object with job_name or pipeline_name", "neither")
}

// jobStatuses and pipelineStatuses are the final statuses an outcome trigger may name.
var (
	jobStatuses = []string{
		string(job.ExecSucceeded), string(job.ExecUserError), string(job.ExecPlatformError),
		string(job.ExecCancelled), string(job.ExecSkipped),
	}
	pipelineStatuses = []string{string(pl.RunSucceeded), string(pl.RunFailed), string(pl.RunCancelled)}
)

func (s *Spec) validateOn(team string) error {
	o := &s.On
	switch o.Kind {
	case Webhook:
		if o.JobName != "" || o.PipelineName != "" || o.Team != "" || len(o.Statuses) > 0 || o.Bucket != "" || o.Prefix != "" {
			return job.Invalid("on", "only kind for a webhook trigger", "more fields")
		}
		return nil
	case Object:
		if o.JobName != "" || o.PipelineName != "" || o.Team != "" || len(o.Statuses) > 0 {
			return job.Invalid("on", "kind, bucket and prefix for an object trigger", "more fields")
		}
		if o.Bucket == "" || len(o.Bucket) > 255 {
			return job.Invalid("on.bucket", "a bucket name of 1 to 255 bytes", fmt.Sprintf("%q", o.Bucket))
		}
		return job.ValidateText("on.prefix", o.Prefix, maxPrefix)
	case Outcome:
		return o.validateOutcome(team)
	}
	return job.Invalid("on.kind", "webhook, outcome or object", fmt.Sprintf("%q", o.Kind))
}

func (o *On) validateOutcome(team string) error {
	if o.Bucket != "" || o.Prefix != "" {
		return job.Invalid("on", "kind, job_name or pipeline_name, team and statuses for an outcome trigger", "bucket or prefix")
	}
	allowed := jobStatuses
	switch {
	case o.JobName != "" && o.PipelineName != "":
		return job.Invalid("on", "one of job_name or pipeline_name", "both")
	case o.JobName != "":
		if err := pl.ValidateName("on.job_name", o.JobName); err != nil {
			return err
		}
	case o.PipelineName != "":
		if err := pl.ValidateName("on.pipeline_name", o.PipelineName); err != nil {
			return err
		}
		allowed = pipelineStatuses
	default:
		return job.Invalid("on.job_name", "the job (or on.pipeline_name the pipeline) whose outcome fires the trigger", "neither")
	}
	o.Team = cmp.Or(o.Team, team)
	if err := job.ValidateTeam(o.Team); err != nil {
		return job.WithParam(err, "on.team")
	}
	if len(o.Statuses) == 0 {
		return job.Invalid("on.statuses", "a list of final statuses: "+fmt.Sprint(allowed), "empty")
	}
	for _, st := range o.Statuses {
		if !slices.Contains(allowed, st) {
			return job.Invalid("on.statuses", "final statuses among "+fmt.Sprint(allowed), fmt.Sprintf("%q", st))
		}
	}
	slices.Sort(o.Statuses)
	o.Statuses = slices.Compact(o.Statuses)
	return nil
}

// Signed is a webhook or object trigger as an invocation is checked against it.
type Signed struct {
	ID, Team string
	Spec     Spec
	// Secret is the signing secret as stored (sealed, or open with key id "").
	Secret secrets.Envelope
}

// SecretOwner is the owner of a trigger's signing secret in the key ring: its id, so that
// a secret copied to another trigger's row does not open.
func SecretOwner(id string) string { return "trigger:" + id }

// NewEvent is an event of a signed call.
type NewEvent struct {
	// Key makes it once: a repeat answers the first event's result and records nothing.
	Key       string
	Source    string
	Arguments json.RawMessage
}

// EventResult is what an invocation's event came to.
type EventResult struct {
	EventID       int64   `json:"event_id"`
	Run           *string `json:"run"`
	CoalescedInto *int64  `json:"coalesced_into"`
	// Duplicate: the key was seen before; the result is the first event's.
	Duplicate bool `json:"-"`
}
