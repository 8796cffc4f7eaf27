package job

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"
)

// DefaultProfile is the execution profile of a deployment that names none: it exists in
// every installation (migration 0055), is granted to every team and adds nothing but the
// team's ServiceAccount. It cannot be deleted.
const DefaultProfile = "default"

// GrantAllTeams in a profile's Teams grants it to every team.
const GrantAllTeams = "*"

// TeamPlaceholder in a ServiceAccount template stands for the job's team.
const TeamPlaceholder = "{team}"

// DefaultServiceAccountTemplate is the ServiceAccount of a team's job pods when neither
// the profile nor --job-service-account-template names another.
const DefaultServiceAccountTemplate = "datajobs-job-" + TeamPlaceholder

// Profile is an execution profile (issue 43, docs/profiles.md): what the platform team lets
// a deployment add to its pods (node pool, tolerations, affinity, GPUs, environment,
// annotations, labels, a ServiceAccount per team), granted to teams. A deployment selects
// one by name; its content is part of the CronJob's rendering. The JSON form is the API's
// body; Affinity is Kubernetes' own form (camelCase), as copied from a pod spec.
type Profile struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// ServiceAccount is a template of the pods' ServiceAccount, with {team} for the job's
	// team (empty: the service's --job-service-account-template).
	ServiceAccount string            `json:"service_account,omitempty"`
	NodeSelector   map[string]string `json:"node_selector,omitempty"`
	Tolerations    []Toleration      `json:"tolerations,omitempty"`
	Affinity       *Affinity         `json:"affinity,omitempty"`
	Resources      ProfileResources  `json:"resources,omitzero"`
	Env            []ProfileEnvVar   `json:"env,omitempty"`
	Annotations    map[string]string `json:"annotations,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
	// Teams are the teams that may select the profile; ["*"] grants it to every team.
	Teams []string `json:"teams,omitempty"`
}

// Toleration is a pod toleration (Kubernetes' fields, snake_case).
type Toleration struct {
	Key      string `json:"key,omitempty"`
	Operator string `json:"operator,omitempty"`
	Value    string `json:"value,omitempty"`
	Effect   string `json:"effect,omitempty"`
	// TolerationSeconds, only with effect NoExecute, bounds how long the pod stays once tainted.
	TolerationSeconds *int64 `json:"toleration_seconds,omitempty"`
}

// Affinity is the node part of a pod's affinity, in Kubernetes' JSON form.
type Affinity struct {
	NodeAffinity *NodeAffinity `json:"nodeAffinity,omitempty"`
}

// NodeAffinity is Kubernetes' NodeAffinity.
type NodeAffinity struct {
	Required  *NodeSelector             `json:"requiredDuringSchedulingIgnoredDuringExecution,omitempty"`
	Preferred []PreferredSchedulingTerm `json:"preferredDuringSchedulingIgnoredDuringExecution,omitempty"`
}

// NodeSelector is Kubernetes' NodeSelector: the terms are ORed.
type NodeSelector struct {
	NodeSelectorTerms []NodeSelectorTerm `json:"nodeSelectorTerms"`
}

// NodeSelectorTerm is Kubernetes' NodeSelectorTerm: the requirements are ANDed.
type NodeSelectorTerm struct {
	MatchExpressions []NodeSelectorRequirement `json:"matchExpressions,omitempty"`
	MatchFields      []NodeSelectorRequirement `json:"matchFields,omitempty"`
}

// NodeSelectorRequirement is Kubernetes' NodeSelectorRequirement.
type NodeSelectorRequirement struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values,omitempty"`
}

// PreferredSchedulingTerm is Kubernetes' PreferredSchedulingTerm.
type PreferredSchedulingTerm struct {
	Weight     int32            `json:"weight"`
	Preference NodeSelectorTerm `json:"preference"`
}

// ProfileResources bound what a deployment of the profile may ask for, and give its pods
// a GPU limit.
type ProfileResources struct {
	// MaxCPU and MaxMemory (Kubernetes quantities) cap the deployment's requests and limits
	// under this profile, within the service's own maxima.
	MaxCPU    string      `json:"max_cpu,omitempty"`
	MaxMemory string      `json:"max_memory,omitempty"`
	GPU       *ProfileGPU `json:"gpu,omitempty"`
}

// ProfileGPU is the extended resource of a GPU and the count every pod of the profile is
// given as its limit (and so its request).
type ProfileGPU struct {
	Resource string `json:"resource"`
	Max      int64  `json:"max"`
}

// ProfileEnvVar is one variable of the job container: a value, or a key of a ConfigMap or
// Secret of the jobs' namespace.
type ProfileEnvVar struct {
	Name            string  `json:"name"`
	Value           string  `json:"value,omitempty"`
	ConfigMapKeyRef *KeyRef `json:"config_map_key_ref,omitempty"`
	SecretKeyRef    *KeyRef `json:"secret_key_ref,omitempty"`
}

// KeyRef names a key of a ConfigMap or Secret.
type KeyRef struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// ProfileRecord is a stored profile with its revision and last change.
type ProfileRecord struct {
	Profile   Profile
	Revision  int
	UpdatedBy string
	UpdatedAt time.Time
	// Deployments is how many deployments select it.
	Deployments int
}

// ProfileChange is what a profile write did: the deployments it re-renders and their
// teams (for the audit log).
type ProfileChange struct {
	Record ProfileRecord
	// Rerendered are the jobs whose CronJob the change alters (each got a revision).
	Rerendered []string
	// Teams are the teams of those jobs.
	Teams []string
}

// Grants reports whether team may select the profile.
func (p Profile) Grants(team string) bool {
	for _, t := range p.Teams {
		if t == GrantAllTeams || t == team {
			return true
		}
	}
	return false
}

// ServiceAccountOf is the ServiceAccount of team's job pods under the profile: its own
// template, else fallback (the service's), with {team} replaced.
func (p Profile) ServiceAccountOf(team, fallback string) string {
	return strings.ReplaceAll(p.ServiceAccountTemplate(fallback), TeamPlaceholder, team)
}

// ServiceAccountTemplate is the template of the profile's ServiceAccount: its own, else
// fallback (the service's), else DefaultServiceAccountTemplate.
func (p Profile) ServiceAccountTemplate(fallback string) string {
	switch {
	case p.ServiceAccount != "":
		return p.ServiceAccount
	case fallback != "":
		return fallback
	}
	return DefaultServiceAccountTemplate
}

// SameRendering reports whether two profiles render the same pods: everything but the
// description and the grants. A change of only those re-renders nothing.
func (p Profile) SameRendering(o Profile) bool {
	p.Description, p.Teams, o.Description, o.Teams = "", nil, "", nil
	return reflect.DeepEqual(normalized(p), normalized(o))
}

// normalized is p with empty maps and slices as nil, so that {} and absent compare equal.
func normalized(p Profile) Profile {
	if len(p.NodeSelector) == 0 {
		p.NodeSelector = nil
	}
	if len(p.Annotations) == 0 {
		p.Annotations = nil
	}
	if len(p.Labels) == 0 {
		p.Labels = nil
	}
	if len(p.Tolerations) == 0 {
		p.Tolerations = nil
	}
	if len(p.Env) == 0 {
		p.Env = nil
	}
	return p
}

// DecodeProfile parses a profile body strictly (unknown fields are refused, as the
// apiserver would refuse them in the pod).
func DecodeProfile(body []byte) (Profile, error) {
	var p Profile
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Profile{}, Invalid("profile", "a JSON object of the profile's fields (docs/profiles.md)", fmt.Sprintf("not one: %v", err))
	}
	return p, nil
}

// ProfileNotFound reports a profile that does not exist.
func ProfileNotFound(name string) *Error {
	return NewError(KindNotFound, fmt.Sprintf("The execution profile %q was not found.", name),
		"No profile of that name exists.",
		nothingChanged, "List the profiles (GET /data-jobs/profiles) and name one of them, or ask an administrator to create it.")
}

// ProfileInUse reports a delete of a profile that deployments select.
func ProfileInUse(name string, deployments int) *Error {
	return NewError(KindConflict, fmt.Sprintf("The execution profile %q cannot be deleted.", name),
		fmt.Sprintf("%d deployments select it.", deployments),
		"The profile was not deleted.", "Deploy those jobs with another execution_profile first, then delete it.")
}

// ProfileGrantInUse reports a change of a profile's teams that would withdraw it from
// teams whose deployments select it (their pods would run under a profile no longer
// theirs, and the admission policy would refuse them): jobs are the first of those
// deployments, of total.
func ProfileGrantInUse(name string, teams, jobs []string, total int) *Error {
	more := ""
	if total > len(jobs) {
		more = fmt.Sprintf(" and %d more", total-len(jobs))
	}
	list := strings.Join(teams, ", ")
	return NewError(KindConflict, fmt.Sprintf("The execution profile %q cannot be withdrawn from %s.", name, list),
		fmt.Sprintf("%d deployments of %s select it: %s%s.", total, list, strings.Join(jobs, ", "), more),
		"The profile was not changed.", "Deploy those jobs with another execution_profile first, then change its teams.")
}

// ProfileNotGranted reports a team selecting a profile it is not granted.
func ProfileNotGranted(user, team, name string) *Error {
	e := Forbidden(user, team, fmt.Sprintf("The execution profile %q is not granted to team %s.", name, team))
	e.Countermeasures = fmt.Sprintf("Select a profile granted to team %s, or ask an administrator to grant %q to it.", team, name)
	return e
}

// AdminOnly reports a non-admin caller of an administrators' route.
func AdminOnly(user string) *Error {
	return NewError(KindForbidden, fmt.Sprintf("User %s may not manage execution profiles.", user),
		"Execution profiles are managed by the members of the admin teams (--admin-teams).",
		nothingChanged, "Ask a member of an admin team to make the change.")
}

// The kinds of a profile's revisions; RevisionProfile is also the kind of the revision of
// each job a profile change re-renders.
const (
	ProfileCreate   = "create"
	ProfileUpdate   = "update"
	ProfileDelete   = "delete"
	RevisionProfile = "profile"
)

// ProfileRevision is one change of a profile.
type ProfileRevision struct {
	Number    int
	Kind      string
	Actor     string
	OpID      string
	CreatedAt time.Time
	Spec      Profile
	Diff      []FieldChange
}

// ProfileDiff is the field changes from before to after (nil: absent), named
// profile.<field>.
func ProfileDiff(before, after *Profile) ([]FieldChange, error) {
	var b, a RevisionSpec
	for _, s := range []struct {
		p   *Profile
		dst *RevisionSpec
	}{{before, &b}, {after, &a}} {
		if s.p == nil {
			continue
		}
		p := *s.p
		p.Name = ""
		raw, err := json.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("encode profile diff: %w", err)
		}
		s.dst.Job = raw
	}
	changes := Diff(b, a)
	for i := range changes {
		changes[i].Field = "profile" + strings.TrimPrefix(changes[i].Field, "job")
	}
	return changes, nil
}
