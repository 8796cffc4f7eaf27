package gitops

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/datajobs/datajobs/internal/job"
	pl "github.com/datajobs/datajobs/internal/pipeline"
	"github.com/datajobs/datajobs/internal/trigger"
)

// State is a team's objects as the database holds them: what a plan starts from.
type State struct {
	Jobs      []job.JobState
	Pipelines []pl.Pipeline
	Triggers  []TriggerState
	// Webhooks are the team's notification webhooks, each with the file that owns it
	// (job.TeamWebhook.ManagedBy).
	Webhooks []job.TeamWebhook
}

// TriggerState is a stored trigger and the file that owns it ("": none).
type TriggerState struct {
	Trigger   trigger.Trigger
	ManagedBy string
}

// Target is what the file asks for, in the domain's values, defaults filled in: the
// service builds it from a parsed File (JobTarget's deployment needs its configuration).
type Target struct {
	Jobs      []JobTarget
	Pipelines []PipelineTarget
	// Triggers are the file's triggers as their POST stores them (TriggerSpec).
	Triggers []trigger.Spec
	// Webhooks are the file's webhooks as their POST stores them (WebhookSpec).
	Webhooks []Webhook
}

// JobTarget is one job of the file: its configuration and its deployment (nil: none).
type JobTarget struct {
	Job        job.Job
	Deployment *job.Deployment
}

// PipelineTarget is one pipeline of the file.
type PipelineTarget struct {
	Name string
	Spec pl.Spec
}

// Options are a plan's parameters.
type Options struct {
	// Owner is the file the apply writes as (the repository of its source): objects owned
	// by another file are conflicts, and only the owner's are pruned.
	Owner string
	// Prune deletes the owner's objects the file no longer lists.
	Prune bool
	// AllowMassPrune lifts the mass-prune guard.
	AllowMassPrune bool
	// PruneMaxFraction is the largest share of the owner's objects one prune deletes
	// (default DefaultPruneMaxFraction); one object may always be pruned.
	PruneMaxFraction float64
}

// DefaultPruneMaxFraction is the default Options.PruneMaxFraction.
const DefaultPruneMaxFraction = 0.5

// Action is what a plan does with one object.
type Action string

// The actions of a plan.
const (
	ActionCreate    Action = "create"
	ActionUpdate    Action = "update"
	ActionDelete    Action = "delete"
	ActionUnchanged Action = "unchanged"
	// ActionKeep is an owned object the file no longer lists, kept: the apply does not
	// prune, or the mass-prune guard refused the prune.
	ActionKeep Action = "keep"
	// ActionConflict is an object another file owns: the apply refuses the whole change.
	ActionConflict Action = "conflict"
)

// The kinds of object.
const (
	KindJob      = "job"
	KindPipeline = "pipeline"
	KindTrigger  = "trigger"
	KindWebhook  = "webhook"
)

// Change is what the plan does with one object.
type Change struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Action Action `json:"action"`
	// Diff is an update's (or a create's) changes, field by field, as a revision shows them.
	Diff []job.FieldChange `json:"diff,omitempty"`
	// Reason says why an object is kept or conflicts.
	Reason string `json:"reason,omitempty"`
	// ManagedBy is the file that owns a conflicting object.
	ManagedBy string `json:"managed_by,omitempty"`
	// TriggerID, InvocationPath and SigningSecret are a webhook or object trigger's that
	// the apply created: its signing secret is shown this once (an update keeps it).
	TriggerID      string `json:"trigger_id,omitempty"`
	InvocationPath string `json:"invocation_path,omitempty"`
	SigningSecret  string `json:"signing_secret,omitempty"`
	// WebhookID is a notification webhook's the apply created; its secret (whsec_...,
	// what its receiver checks the signatures with) is SigningSecret, shown this once.
	WebhookID string `json:"webhook_id,omitempty"`

	// What the apply needs: the current state (nil for a create) and the target.
	cur      *job.JobState
	job      *JobTarget
	curPipe  *pl.Pipeline
	pipeline *PipelineTarget
	curTrig  *TriggerState
	trig     *trigger.Spec
	curHook  *job.TeamWebhook
	hook     *Webhook
	index    int  // the object's place in its list of the file (-1: not in the file)
	jobWrite bool // the job's configuration changes
	depWrite bool // the job's deployment changes
}

// Plan is every change an apply of a file makes to a team, in the order it makes them:
// jobs created and updated, pipelines created and updated, triggers, then webhooks
// created and updated, then triggers, pipelines, jobs and webhooks deleted (a pipeline may need a new job, a trigger a
// new job or pipeline; what a trigger or a pipeline starts is deleted after it).
type Plan struct {
	Team string `json:"team"`
	// BaseRevision names the state the plan was made from: an apply given it refuses to
	// run on a state that moved since.
	BaseRevision string   `json:"base_revision"`
	Changes      []Change `json:"changes"`
	// Summary counts the changes by action.
	Summary map[Action]int `json:"summary"`
	// PruneRefused is the mass-prune guard's verdict when it kept the prunes.
	PruneRefused string `json:"prune_refused,omitempty"`
}

// Conflict returns the first conflict of the plan, if any.
func (p Plan) Conflict() (Change, bool) {
	i := slices.IndexFunc(p.Changes, func(c Change) bool { return c.Action == ActionConflict })
	if i < 0 {
		return Change{}, false
	}
	return p.Changes[i], true
}

// Writes reports whether applying the plan writes anything.
func (p Plan) Writes() bool {
	return p.Summary[ActionCreate]+p.Summary[ActionUpdate]+p.Summary[ActionDelete] > 0
}

// NewPlan plans the change of team's state cur to the file's target. It is pure.
func NewPlan(team string, target Target, cur State, o Options) (Plan, error) {
	p := Plan{Team: team, Changes: []Change{}, Summary: map[Action]int{}}
	var err error
	if p.BaseRevision, err = Fingerprint(cur); err != nil {
		return Plan{}, err
	}
	for _, plan := range []func() ([]Change, error){
		func() ([]Change, error) {
			return planEach(target.Jobs, cur.Jobs, func(t *JobTarget) string { return t.Job.Name },
				func(s *job.JobState) string { return s.Job.Name }, planJob, o.Owner)
		},
		func() ([]Change, error) {
			return planEach(target.Pipelines, cur.Pipelines, func(t *PipelineTarget) string { return t.Name },
				func(s *pl.Pipeline) string { return s.Name }, planPipeline, o.Owner)
		},
		func() ([]Change, error) {
			return planEach(target.Triggers, cur.Triggers, func(t *trigger.Spec) string { return t.Name },
				func(s *TriggerState) string { return s.Trigger.Spec.Name }, planTrigger, o.Owner)
		},
	} {
		cs, err := plan()
		if err != nil {
			return Plan{}, err
		}
		p.Changes = append(p.Changes, cs...)
	}
	p.Changes = append(p.Changes, planWebhooks(target.Webhooks, cur.Webhooks, o.Owner)...)
	p.Changes = append(p.Changes, prunes(target, cur, o, &p.PruneRefused)...)
	for _, c := range p.Changes {
		p.Summary[c.Action]++
	}
	return p, nil
}

// planEach plans each object of the file (want) against the current one of its name
// (nil: none), in the file's order, each change with its index in the file.
func planEach[W, C any](want []W, cur []C, wantName func(*W) string, curName func(*C) string,
	plan func(*W, *C, string) (Change, error), owner string,
) ([]Change, error) {
	byName := make(map[string]*C, len(cur))
	for i := range cur {
		byName[curName(&cur[i])] = &cur[i]
	}
	out := make([]Change, 0, len(want))
	for i := range want {
		c, err := plan(&want[i], byName[wantName(&want[i])], owner)
		if err != nil {
			return nil, err
		}
		c.index = i
		out = append(out, c)
	}
	return out, nil
}

// planJob plans one job of the file against its current state (nil: none).
func planJob(t *JobTarget, cur *job.JobState, owner string) (Change, error) {
	c := Change{Kind: KindJob, Name: t.Job.Name, cur: cur, job: t}
	after, err := job.NewRevisionSpec(normal(t.Job), normalDep(t.Deployment))
	if err != nil {
		return Change{}, err
	}
	if cur == nil {
		c.Action, c.Diff, c.jobWrite, c.depWrite = ActionCreate, job.Diff(job.RevisionSpec{}, after), true, t.Deployment != nil
		return c, nil
	}
	if cur.Job.ManagedBy != "" && cur.Job.ManagedBy != owner {
		c.Action, c.ManagedBy, c.Reason = ActionConflict, cur.Job.ManagedBy, "managed by the file of "+cur.Job.ManagedBy
		return c, nil
	}
	before, err := job.NewRevisionSpec(normal(cur.Job), normalDep(cur.Desired))
	if err != nil {
		return Change{}, err
	}
	c.Diff = job.Diff(before, after)
	c.jobWrite = !cur.Job.SameConfig(t.Job) || cur.Job.Description != t.Job.Description
	switch {
	case t.Deployment == nil:
		c.depWrite = cur.Desired != nil
	case cur.Desired == nil:
		c.depWrite = true
	default:
		c.depWrite = !t.Deployment.SameConfig(*cur.Desired)
	}
	c.Action = ActionUnchanged
	if len(c.Diff) > 0 {
		c.Action = ActionUpdate
	}
	return c, nil
}

// planPipeline plans one pipeline of the file against its current state (nil: none).
func planPipeline(t *PipelineTarget, cur *pl.Pipeline, owner string) (Change, error) {
	c := Change{Kind: KindPipeline, Name: t.Name, curPipe: cur, pipeline: t}
	var curSpec any
	if cur != nil {
		curSpec = cur.Spec
	}
	return planSpec(c, t.Spec, curSpec, cur != nil, owner, func() string { return cur.ManagedBy })
}

// planTrigger plans one trigger of the file against its current state (nil: none).
func planTrigger(t *trigger.Spec, cur *TriggerState, owner string) (Change, error) {
	c := Change{Kind: KindTrigger, Name: t.Name, curTrig: cur, trig: t}
	var curSpec any
	if cur != nil {
		curSpec = cur.Trigger.Spec
	}
	return planSpec(c, t, curSpec, cur != nil, owner, func() string { return cur.ManagedBy })
}

// planSpec plans the change c of an object stored as the JSON of its spec (a pipeline, a
// trigger): to cur (found: it exists, owned by the file of managedBy) from next.
func planSpec(c Change, next, cur any, found bool, owner string, managedBy func() string) (Change, error) {
	after, err := json.Marshal(next)
	if err != nil {
		return Change{}, fmt.Errorf("encode %s %s: %w", c.Kind, c.Name, err)
	}
	if !found {
		c.Action, c.Diff = ActionCreate, job.DiffJSON(c.Kind, nil, after)
		return c, nil
	}
	if m := managedBy(); m != "" && m != owner {
		c.Action, c.ManagedBy, c.Reason = ActionConflict, m, "managed by the file of "+m
		return c, nil
	}
	before, err := json.Marshal(cur)
	if err != nil {
		return Change{}, fmt.Errorf("encode %s %s: %w", c.Kind, c.Name, err)
	}
	c.Diff = job.DiffJSON(c.Kind, before, after)
	c.Action = ActionUnchanged
	if len(c.Diff) > 0 {
		c.Action = ActionUpdate
	}
	return c, nil
}

// prunes plans the owner's objects the file no longer lists: deleted when o.Prune and
// the mass-prune guard allows, kept otherwise (refused then holds the guard's verdict).
// Triggers come first, then pipelines, then jobs: what a trigger or a pipeline starts is
// deleted after it; webhooks, which name nothing, last.
func prunes(target Target, cur State, o Options, refused *string) []Change {
	listed := map[string]bool{}
	for _, t := range target.Jobs {
		listed[KindJob+"/"+t.Job.Name] = true
	}
	for _, t := range target.Pipelines {
		listed[KindPipeline+"/"+t.Name] = true
	}
	for _, t := range target.Triggers {
		listed[KindTrigger+"/"+t.Name] = true
	}
	for _, w := range target.Webhooks {
		listed[KindWebhook+"/"+w.Name] = true
	}
	var out []Change
	owned := 0
	for _, ts := range cur.Triggers {
		owned += btoi(ts.ManagedBy == o.Owner)
		if ts.ManagedBy == o.Owner && !listed[KindTrigger+"/"+ts.Trigger.Spec.Name] {
			out = append(out, Change{Kind: KindTrigger, Name: ts.Trigger.Spec.Name, index: -1})
		}
	}
	for _, pp := range cur.Pipelines {
		owned += btoi(pp.ManagedBy == o.Owner)
		if pp.ManagedBy == o.Owner && !listed[KindPipeline+"/"+pp.Name] {
			out = append(out, Change{Kind: KindPipeline, Name: pp.Name, index: -1})
		}
	}
	for _, st := range cur.Jobs {
		owned += btoi(st.Job.ManagedBy == o.Owner)
		if st.Job.ManagedBy == o.Owner && !listed[KindJob+"/"+st.Job.Name] {
			out = append(out, Change{Kind: KindJob, Name: st.Job.Name, index: -1})
		}
	}
	for _, w := range cur.Webhooks {
		owned += btoi(w.ManagedBy == o.Owner)
		if w.ManagedBy == o.Owner && !listed[KindWebhook+"/"+w.Name] {
			out = append(out, Change{Kind: KindWebhook, Name: w.Name, index: -1})
		}
	}
	why := "not in the file; apply with prune=true to delete it"
	if o.Prune {
		why = massPrune(len(out), owned, o)
		*refused = why
	}
	for i := range out {
		out[i].Action, out[i].Reason = ActionKeep, why
		if why == "" {
			out[i].Action = ActionDelete
		}
	}
	return out
}

// massPrune is the mass-prune guard's verdict on deleting n of the owner's owned objects:
// "" when allowed, else why not. As the synchronizer's guard for orphaned CronJobs, it
// holds back a prune of more than a share of what exists, which looks like a wrong file
// (an empty list, another team's file) rather than objects removed one by one.
func massPrune(n, owned int, o Options) string {
	limit := cmp.Or(o.PruneMaxFraction, DefaultPruneMaxFraction)
	if n <= 1 || o.AllowMassPrune || float64(n) <= limit*float64(owned) {
		return ""
	}
	return fmt.Sprintf("kept: the prune would delete %d of the %d objects the file owns, more than the prune limit of %g; apply with allow_mass_prune=true if that is meant", n, owned, limit)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// normal is j as a revision compares it: absent contact lists are empty ones, as the
// database stores them.
func normal(j job.Job) job.Job {
	nn := func(s []string) []string {
		if s == nil {
			return []string{}
		}
		return s
	}
	c := &j.Contacts
	c.NotifiedOnJobFailureUserError, c.NotifiedOnJobFailurePlatformError = nn(c.NotifiedOnJobFailureUserError), nn(c.NotifiedOnJobFailurePlatformError)
	c.NotifiedOnJobSuccess, c.NotifiedOnJobDeploy = nn(c.NotifiedOnJobSuccess), nn(c.NotifiedOnJobDeploy)
	return j
}

// normalDep is d as a revision compares it: the profile it selects named, "" being the
// default one.
func normalDep(d *job.Deployment) *job.Deployment {
	if d == nil {
		return nil
	}
	out := *d
	out.ExecutionProfile = d.ProfileName()
	return &out
}

// Fingerprint names a team's state: equal states, equal names. A plan's BaseRevision.
func Fingerprint(st State) (string, error) {
	h := sha256.New()
	for _, s := range sortedBy(st.Jobs, func(s job.JobState) string { return s.Job.Name }) {
		spec, err := job.NewRevisionSpec(normal(s.Job), normalDep(s.Desired))
		if err != nil {
			return "", err
		}
		b, err := json.Marshal(struct {
			Spec  job.RevisionSpec
			Owner string
		}{spec, s.Job.ManagedBy})
		if err != nil {
			return "", fmt.Errorf("fingerprint job %s: %w", s.Job.Name, err)
		}
		_, _ = fmt.Fprintf(h, "job %s %s\n", s.Job.Name, b)
	}
	for _, pp := range sortedBy(st.Pipelines, func(p pl.Pipeline) string { return p.Name }) {
		b, err := json.Marshal(pp.Spec)
		if err != nil {
			return "", fmt.Errorf("fingerprint pipeline %s: %w", pp.Name, err)
		}
		_, _ = fmt.Fprintf(h, "pipeline %s %s %s\n", pp.Name, pp.ManagedBy, b)
	}
	for _, ts := range sortedBy(st.Triggers, func(t TriggerState) string { return t.Trigger.Spec.Name }) {
		b, err := json.Marshal(ts.Trigger.Spec)
		if err != nil {
			return "", fmt.Errorf("fingerprint trigger %s: %w", ts.Trigger.Spec.Name, err)
		}
		_, _ = fmt.Fprintf(h, "trigger %s %s %s\n", ts.Trigger.Spec.Name, ts.ManagedBy, b)
	}
	for _, w := range sortedBy(st.Webhooks, func(w job.TeamWebhook) string { return w.Name }) {
		b, err := json.Marshal(webhookOf(w))
		if err != nil {
			return "", fmt.Errorf("fingerprint webhook %s: %w", w.Name, err)
		}
		_, _ = fmt.Fprintf(h, "webhook %s %s %s\n", w.Name, w.ManagedBy, b)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)[:16]), nil
}

func sortedBy[T any](s []T, key func(T) string) []T {
	out := slices.Clone(s)
	slices.SortFunc(out, func(a, b T) int { return cmp.Compare(key(a), key(b)) })
	return out
}
