// Package pipeline is the domain of pipelines (issue 40): the spec a PUT stores (nodes,
// their dependencies, trigger rules and failure rules), its validation, and the pure step
// that decides what a run does next from its nodes' states. It does no I/O: the store
// keeps the rows and the leader's stepper applies what Next decides.
package pipeline

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/datajobs/datajobs/internal/job"
)

// Bounds of a pipeline.
const (
	// MaxNodes bounds the nodes of one pipeline: each is a row per run, stepped under the
	// run's lock.
	MaxNodes = 200
	// MaxActiveRunsLimit bounds max_active_runs.
	MaxActiveRunsLimit = 100
	// maxDescription bounds the description, in bytes.
	maxDescription = 4096
	// maxContacts bounds each contact list, as a job's; maxContactLen an address, in bytes.
	maxContacts   = 100
	maxContactLen = 253
)

// TriggerRule says when a node may start, from the final states of the nodes it depends on.
type TriggerRule string

// The trigger rules (Airflow's names and meanings).
const (
	// AllSuccess starts a node once every upstream node succeeded (the default).
	AllSuccess TriggerRule = "all_success"
	// AllDone starts a node once every upstream node ended, however.
	AllDone TriggerRule = "all_done"
	// OneFailed starts a node as soon as one upstream node failed.
	OneFailed TriggerRule = "one_failed"
	// NoneFailed starts a node once every upstream node ended and none failed (skipped ones
	// pass).
	NoneFailed TriggerRule = "none_failed"
)

// OnFailure says what a node's failure does to its run.
type OnFailure string

// The failure rules.
const (
	// FailPipeline (the default): the run fails, and no node starts after it but those
	// whose trigger rule handles failures (all_done, one_failed).
	FailPipeline OnFailure = "fail_pipeline"
	// Continue: the failure is its downstream's to judge (by their trigger rules) and does
	// not by itself fail the run.
	Continue OnFailure = "continue"
)

// Schedule is when a pipeline starts by itself.
type Schedule struct {
	Cron     string `json:"schedule_cron"`
	TimeZone string `json:"time_zone"`
	// CatchUp is how many schedule times missed beyond the starting deadline (the leader
	// was down) start late, the latest ones, as a job's catch_up (0 to job.MaxCatchUp;
	// default 0: a missed time is not run).
	CatchUp int `json:"catch_up"`
}

// Contacts are who is mailed when a run ends (one mail per run, never one per node): the
// store's trigger of a run's end (migration 0043) reads them from the run's pinned spec.
type Contacts struct {
	// NotifiedOnRunFailure is mailed when a run fails or is cancelled.
	NotifiedOnRunFailure []string `json:"notified_on_run_failure"`
	// NotifiedOnRunSuccess is mailed when a run succeeds.
	NotifiedOnRunSuccess []string `json:"notified_on_run_success"`
}

// validate checks both lists as a job's contact lists are checked and makes absent ones
// empty.
func (c *Contacts) validate() error {
	for _, l := range []struct {
		field string
		list  *[]string
	}{{"contacts.notified_on_run_failure", &c.NotifiedOnRunFailure}, {"contacts.notified_on_run_success", &c.NotifiedOnRunSuccess}} {
		if *l.list == nil {
			*l.list = []string{}
		}
		if len(*l.list) > maxContacts {
			return job.Invalid(l.field, fmt.Sprintf("a list of at most %d addresses", maxContacts), fmt.Sprintf("%d addresses", len(*l.list)))
		}
		for _, a := range *l.list {
			if strings.TrimSpace(a) == "" {
				return job.Invalid(l.field, "a list of non-empty addresses", fmt.Sprintf("%q", a))
			}
			if err := job.ValidateText(l.field, a, maxContactLen); err != nil {
				return err
			}
		}
	}
	return nil
}

// Node is one step of a pipeline: a run of the job JobName of Team.
type Node struct {
	Name        string          `json:"name" jsonschema:"required"`
	JobName     string          `json:"job_name" jsonschema:"required"`
	Team        string          `json:"team"`
	DependsOn   []string        `json:"depends_on"`
	TriggerRule TriggerRule     `json:"trigger_rule"`
	Arguments   json.RawMessage `json:"arguments,omitempty"`
	OnFailure   OnFailure       `json:"on_failure"`
}

// Spec is a pipeline as a PUT stores it, defaults applied.
type Spec struct {
	Description   string    `json:"description"`
	Schedule      *Schedule `json:"schedule,omitempty"`
	Enabled       bool      `json:"enabled"`
	MaxActiveRuns int       `json:"max_active_runs"`
	Contacts      Contacts  `json:"contacts"`
	Nodes         []Node    `json:"nodes"`
}

// Body is the PUT body as decoded: pointers where an absent field has a default. A
// jobs-as-code file's pipeline is one too (gitops.Pipeline).
type Body struct {
	Description   string    `json:"description,omitempty"`
	Schedule      *Schedule `json:"schedule,omitempty"`
	Enabled       *bool     `json:"enabled,omitempty"`
	MaxActiveRuns *int      `json:"max_active_runs,omitempty"`
	Contacts      Contacts  `json:"contacts"`
	Nodes         []Node    `json:"nodes" jsonschema:"required"`
}

// Parse decodes and validates the PUT body of the pipeline name of team: defaults applied,
// every rule of the contract checked (names, cron and time zone, the graph). Unknown
// fields are ignored, so that the body a GET answers can be sent back.
func Parse(team, name string, raw []byte) (Spec, error) {
	if err := ValidateName("pipeline_name", name); err != nil {
		return Spec{}, err
	}
	var b Body
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&b); err != nil {
		return Spec{}, job.Invalid("body", "a JSON object describing a pipeline", "not one: "+err.Error())
	}
	s := Spec{
		Description: b.Description, Schedule: b.Schedule, Enabled: b.Enabled == nil || *b.Enabled,
		MaxActiveRuns: 1, Contacts: b.Contacts, Nodes: b.Nodes,
	}
	if b.MaxActiveRuns != nil {
		s.MaxActiveRuns = *b.MaxActiveRuns
	}
	return s, s.validate(team)
}

// ValidateName checks a pipeline or node name by the job-name rule; field names it in the
// error.
func ValidateName(field, name string) error {
	return job.WithParam(job.ValidateName(name), field)
}

// validate checks s and fills the nodes' defaults (team, trigger rule, on_failure).
func (s *Spec) validate(team string) error {
	if err := job.ValidateText("description", s.Description, maxDescription); err != nil {
		return err
	}
	if s.MaxActiveRuns < 1 || s.MaxActiveRuns > MaxActiveRunsLimit {
		return job.Invalid("max_active_runs", fmt.Sprintf("from 1 to %d", MaxActiveRunsLimit), s.MaxActiveRuns)
	}
	if err := s.Contacts.validate(); err != nil {
		return err
	}
	if sc := s.Schedule; sc != nil {
		sc.Cron = job.CleanSchedule(sc.Cron)
		if sc.Cron == "" {
			return job.Invalid("schedule.schedule_cron", "a cron expression (omit schedule for a pipeline started only by the API)", `""`)
		}
		if err := job.ValidateSchedule(sc.Cron); err != nil {
			return err
		}
		if err := job.ValidateTimeZone(sc.TimeZone); err != nil {
			return err
		}
		sc.TimeZone = cmp.Or(sc.TimeZone, job.DefaultTimeZone)
		if sc.CatchUp < 0 || sc.CatchUp > job.MaxCatchUp {
			return job.Invalid("schedule.catch_up", fmt.Sprintf("a number of runs from 0 to %d", job.MaxCatchUp), sc.CatchUp)
		}
	}
	switch n := len(s.Nodes); {
	case n == 0:
		return job.Invalid("nodes", "a list of at least one node", "empty")
	case n > MaxNodes:
		return job.Invalid("nodes", fmt.Sprintf("a list of at most %d nodes", MaxNodes), fmt.Sprintf("%d nodes", n))
	}
	seen := make(map[string]bool, len(s.Nodes))
	for i := range s.Nodes {
		n := &s.Nodes[i]
		if err := n.validate(team); err != nil {
			return err
		}
		if seen[n.Name] {
			return job.Invalid("nodes", "nodes of distinct names", fmt.Sprintf("two nodes named %q", n.Name))
		}
		seen[n.Name] = true
	}
	for _, n := range s.Nodes {
		for _, d := range n.DependsOn {
			if !seen[d] {
				return job.Invalid("depends_on", "names of nodes of the pipeline", fmt.Sprintf("%q in node %q, which names no node", d, n.Name))
			}
		}
	}
	if c := s.cycle(); c != nil {
		return job.Invalid("nodes", "a graph without cycles", "a cycle: "+strings.Join(c, " -> "))
	}
	return nil
}

// validate checks one node and fills its defaults.
func (n *Node) validate(team string) error {
	if err := ValidateName("nodes.name", n.Name); err != nil {
		return err
	}
	if err := ValidateName("nodes.job_name", n.JobName); err != nil {
		return err
	}
	n.Team = cmp.Or(n.Team, team)
	if err := job.ValidateTeam(n.Team); err != nil {
		return err
	}
	n.TriggerRule = cmp.Or(n.TriggerRule, AllSuccess)
	if !slices.Contains([]TriggerRule{AllSuccess, AllDone, OneFailed, NoneFailed}, n.TriggerRule) {
		return job.Invalid("trigger_rule", "one of all_success, all_done, one_failed, none_failed", fmt.Sprintf("%q in node %q", n.TriggerRule, n.Name))
	}
	n.OnFailure = cmp.Or(n.OnFailure, FailPipeline)
	if n.OnFailure != FailPipeline && n.OnFailure != Continue {
		return job.Invalid("on_failure", "fail_pipeline or continue", fmt.Sprintf("%q in node %q", n.OnFailure, n.Name))
	}
	args, err := job.ValidateArgs(n.Arguments)
	if err != nil {
		return err
	}
	n.Arguments = args
	for i, d := range n.DependsOn {
		if slices.Contains(n.DependsOn[:i], d) {
			return job.Invalid("depends_on", "distinct node names", fmt.Sprintf("%q twice in node %q", d, n.Name))
		}
	}
	if n.DependsOn == nil {
		n.DependsOn = []string{}
	}
	return nil
}

// cycle returns a cycle of s's graph as the names along it, its first name repeated at the
// end (a -> b -> a), or nil when there is none.
func (s *Spec) cycle() []string {
	const (
		unseen = iota
		onPath
		done
	)
	state := make(map[string]int, len(s.Nodes))
	deps := s.deps()
	var path []string
	var visit func(n string) []string
	visit = func(n string) []string {
		state[n] = onPath
		path = append(path, n)
		for _, d := range deps[n] {
			switch state[d] {
			case onPath:
				i := slices.Index(path, d)
				return append(slices.Clone(path[i:]), d)
			case unseen:
				if c := visit(d); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		state[n] = done
		return nil
	}
	for _, n := range s.Nodes {
		if state[n.Name] == unseen {
			if c := visit(n.Name); c != nil {
				slices.Reverse(c) // dependencies point upstream: show the flow's direction
				return c
			}
		}
	}
	return nil
}

// deps maps each node to the nodes it depends on.
func (s *Spec) deps() map[string][]string {
	out := make(map[string][]string, len(s.Nodes))
	for _, n := range s.Nodes {
		out[n.Name] = n.DependsOn
	}
	return out
}

// Node returns the node name of s.
func (s *Spec) Node(name string) (Node, bool) {
	i := slices.IndexFunc(s.Nodes, func(n Node) bool { return n.Name == name })
	if i < 0 {
		return Node{}, false
	}
	return s.Nodes[i], true
}

// Jobs returns the distinct jobs the nodes run, as team/name pairs, sorted by name.
func (s *Spec) Jobs() []JobRef {
	var out []JobRef
	for _, n := range s.Nodes {
		r := JobRef{Team: n.Team, Name: n.JobName}
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b JobRef) int { return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Team, b.Team)) })
	return out
}

// JobRef names a job.
type JobRef struct{ Team, Name string }

// Subset returns s restricted to the nodes names (dependencies on nodes outside dropped),
// for a backfill of some nodes; an unknown name is an error.
func (s Spec) Subset(names []string) (Spec, error) {
	if len(names) == 0 {
		return s, nil
	}
	out := s
	out.Nodes = nil
	for _, name := range names {
		if _, ok := s.Node(name); !ok {
			return Spec{}, job.Invalid("nodes", "names of nodes of the pipeline", fmt.Sprintf("%q, which names no node", name))
		}
	}
	for _, n := range s.Nodes {
		if !slices.Contains(names, n.Name) {
			continue
		}
		n.DependsOn = slices.DeleteFunc(slices.Clone(n.DependsOn), func(d string) bool { return !slices.Contains(names, d) })
		out.Nodes = append(out.Nodes, n)
	}
	return out, nil
}
