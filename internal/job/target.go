package job

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// DefaultTargetName is the execution target of every team no other target is the default
// for: the namespace serve's --namespace names, as every installation had before targets.
const DefaultTargetName = "default"

// Target is an execution target (issue 44, docs/targets.md): a namespace of a cluster where
// the CronJobs and Jobs of the teams it is the default for live, driven by a synchronizer
// shard of its own.
type Target struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// KubeconfigSecret names the Secret, in the default target's namespace, whose
	// `kubeconfig` key reaches another cluster; empty is the cluster the service runs
	// against. The API answers it as the target's cluster, not as a field of its own.
	KubeconfigSecret string `json:"-"`
	// Teams may name the target in a deployment besides DefaultFor ("*": every team).
	Teams []string `json:"teams"`
	// DefaultFor are the teams whose deployments run here unless they name another target.
	DefaultFor []string  `json:"default_for"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// Local is true for a target of the cluster the service runs against.
func (t Target) Local() bool { return t.KubeconfigSecret == "" }

// SamePlace is true when t and o are the same namespace of the same cluster: a shard
// keeps running through a change of anything else.
func (t Target) SamePlace(o Target) bool {
	return t.Namespace == o.Namespace && t.KubeconfigSecret == o.KubeconfigSecret
}

// Validate checks a target by Kubernetes' own rules for the names it holds; the error
// names the field.
func (t Target) Validate() error {
	if errs := validation.IsDNS1123Label(t.Name); len(errs) > 0 {
		return kubeInvalid("name", "a DNS label (lowercase letters, digits and '-', at most 63 characters)", t.Name, errs)
	}
	if errs := validation.IsDNS1123Label(t.Namespace); len(errs) > 0 {
		return kubeInvalid("namespace", "a namespace name (a DNS label)", t.Namespace, errs)
	}
	if t.KubeconfigSecret != "" {
		if errs := validation.IsDNS1123Subdomain(t.KubeconfigSecret); len(errs) > 0 {
			return kubeInvalid("cluster.kubeconfig_secret", "a Secret name (a DNS subdomain)", t.KubeconfigSecret, errs)
		}
	}
	for i, team := range t.Teams {
		if team == "*" && len(t.Teams) == 1 {
			continue
		}
		if err := ValidateTeam(team); err != nil {
			return Invalid(fmt.Sprintf("teams[%d]", i), `a team name, or ["*"] alone for every team`, quote(team))
		}
	}
	for i, team := range t.DefaultFor {
		if err := ValidateTeam(team); err != nil {
			return Invalid(fmt.Sprintf("default_for[%d]", i), "a team name", quote(team))
		}
	}
	if dup := firstDuplicate(t.DefaultFor); dup != "" {
		return Invalid("default_for", "each team once", quote(dup))
	}
	return nil
}

// Granted is true when team may run its deployments in t.
func (t Target) Granted(team string) bool {
	return slices.Contains(t.DefaultFor, team) || slices.Contains(t.Teams, team) || slices.Contains(t.Teams, "*")
}

func firstDuplicate(xs []string) string {
	seen := make(map[string]bool, len(xs))
	for _, x := range xs {
		if seen[x] {
			return x
		}
		seen[x] = true
	}
	return ""
}

// TargetNotFound reports a target name that does not exist.
func TargetNotFound(name string) *Error {
	return NewError(KindNotFound, fmt.Sprintf("The execution target %q was not found.", name),
		"No target of that name exists.",
		nothingChanged, "List the targets (GET /data-jobs/targets) and name one of them, or ask an administrator to create it.")
}

// TargetInUse reports a change a target's content refuses: a delete, or a move of its
// namespace or cluster, while it holds CronJobs or runs, or teams default to it.
func TargetInUse(name, change, why string) *Error {
	return NewError(KindConflict, fmt.Sprintf("The execution target %q cannot %s.", name, change), why,
		"The target was not changed.", "Move its teams to another target first (PUT that target with them in default_for) and wait until its CronJobs and runs are gone, then try again.")
}

// TargetDefaultTaken reports a team that is already the default of another target.
func TargetDefaultTaken(team, other string) *Error {
	return NewError(KindConflict, fmt.Sprintf("The team %q cannot default to this target.", team),
		fmt.Sprintf("It is in default_for of the target %q; a team has one default target.", other),
		"The target was not changed.", fmt.Sprintf("Remove %q from the default_for of %q first, or put this target's changes there.", team, other))
}

// TargetPlaceTaken reports a target whose namespace of a cluster another target drives.
func TargetPlaceTaken(namespace string) *Error {
	return NewError(KindConflict, fmt.Sprintf("The namespace %q is another target's.", namespace),
		"Two targets in one namespace of one cluster would each delete the other's CronJobs.",
		"The target was not changed.", "Choose another namespace, or change that target instead.")
}

// TargetNotGranted reports a deployment naming a target its team may not run in.
func TargetNotGranted(name, team string) *Error {
	return NewError(KindForbidden, fmt.Sprintf("The team %q may not run its jobs in the execution target %q.", team, name),
		"The target's teams do not include the team.",
		nothingChanged, "Deploy without execution_target (the team's default target), or ask an administrator to add the team to the target's teams.")
}

// TargetOutage is an execution target whose shard cannot run, as a replica last reported
// it (store.ReportTargetUnreachable): the console's banner.
type TargetOutage struct {
	Target string
	// Since is when the outage began; ReportedAt when a replica last said so.
	Since, ReportedAt time.Time
	// Reason is the error that keeps the shard from running, bounded.
	Reason string
	// Teams are the teams whose jobs run in the target.
	Teams []string
}
