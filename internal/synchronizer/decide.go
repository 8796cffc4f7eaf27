package synchronizer

import (
	"fmt"
	"time"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
)

// The decide step. A reconcile loads (a name's state and CronJob, or a pass's reads),
// plans (plan: what the cluster needs to match the row), decides (decide: what the term's
// guards and verdicts let it do of that) and executes (execute: the writes). Both middle
// steps are pure. Every guard that stops or defers a write is a step of decide, not an
// amendment made on the way to the write, so that the plan `datajobs sync --once` prints
// (and LatestPlans shows) is everything that decided the write: as gitops-engine decides
// its prunes in getSyncTasks, before runTasks.

// verdicts is what decide reads besides the plan: the term's standing refusals, the
// latest full pass's approval of orphans, and which teams have a Secret.
type verdicts struct {
	// restore is the standing restore refusal (restore.go), or nil; guardRestore is false
	// when the guard is off: a dry run (which should show what a sync would do) or
	// --accept-restore.
	restore      *RestoreRefusal
	guardRestore bool
	// prune is the latest full pass's verdict on orphans (prune.go).
	prune pruneVerdict
	// pass is set when deciding a full pass's plans, whose own finding made restore: a
	// single reconcile's suspicion (a CronJob newer than its row) is the pass's to judge.
	pass bool
	// teamSecret reports whether a team has a Secret; nil without team Secrets.
	teamSecret func(team string) bool
	// installation is the term's installation id: only its CronJobs are guarded.
	installation string
}

// decide turns a plan into what is done: the restore guard may refuse it, the prune
// verdict may keep an orphan, and a CronJob write that may change what a team's Secret
// needs asks for the team Secrets' reconcile after it. It is pure.
func decide(p Plan, v verdicts) Plan {
	p = decideRestore(p, v)
	p = decidePrune(p, v)
	p.TeamSecrets = teamSecretsAfter(p, v.teamSecret)
	return p
}

// decideRestore refuses a plan that writes while a restore is refused (restore.go). Out
// of a pass, a CronJob of this installation newer than the row just loaded refuses the
// plan too, and asks for a full pass to decide for the whole namespace.
func decideRestore(p Plan, v verdicts) Plan {
	switch {
	case !v.guardRestore:
		return p
	case v.restore != nil:
		return refuseRestored(p, v.restore)
	case v.pass || p.Live == nil || p.State.Job == nil || !owned(p.Live, p.State, v.installation):
		return p
	}
	if rev, ok := kube.Revision(p.Live); ok && rev > p.State.Job.Revision {
		p.Resync = true
		return refuseRestored(p, &RestoreRefusal{Reason: fmt.Sprintf("restore suspected: CronJob revision %d is newer than its row's %d; a full pass decides", rev, p.State.Job.Revision)})
	}
	return p
}

// decidePrune keeps an orphan the latest full pass did not approve for deletion: refused
// as a mass prune, or not yet judged (found between passes: only a full pass can tell one
// orphan from a mass prune, so it asks for one).
func decidePrune(p Plan, v verdicts) Plan {
	switch {
	case p.Action != ActionOrphan:
	case v.prune.refusal != nil:
		p.Action, p.Reason = ActionKeep, v.prune.refusal.Reason
	case v.prune.approved[p.Name] != p.Live.UID:
		p.Action, p.Reason, p.Resync = ActionKeep, "an orphan no full pass has judged yet: a full pass decides whether deleting it is a mass prune", true
	}
	return p
}

// teamSecretsAfter reports whether a CronJob write may change what the team Secrets need:
// a job of a team with credentials, or a CronJob of a team that has a Secret.
func teamSecretsAfter(p Plan, teamSecret func(team string) bool) bool {
	if teamSecret == nil || !p.Action.writesKubernetes() {
		return false
	}
	if p.State.Job != nil && p.State.Job.TeamOAuth {
		return true
	}
	return p.Live != nil && teamSecret(p.Live.Labels[kube.LabelTeam])
}

// passFindings is what a full pass found besides its plans, for the verdicts it makes.
type passFindings struct {
	// full says whether the pass read every row (readStates).
	full    bool
	restore restoreFinding
	// jobs counts the data jobs in the database, owned the CronJobs of this installation.
	jobs, owned int
}

// decidePass decides the plans of a full pass and returns the verdicts the pass makes, for
// its single reconciles to read until the next pass: the restore refusal, kept from an
// earlier pass or made from this pass's finding, is decided first, and the prune verdict
// is then made from the orphans that are left. It is pure; recordRestore and recordPrune
// keep what it returns.
func decidePass(plans []Plan, f passFindings, v verdicts, cfg Config, now time.Time) verdicts {
	v.pass = true
	v.restore = restoreVerdict(f.restore, v.restore, cfg.AcceptRestore, now)
	for i := range plans {
		plans[i] = decideRestore(plans[i], v)
	}
	v.prune = pruneVerdictOf(plans, f.jobs, f.owned, cfg, now)
	for i := range plans {
		plans[i] = decide(plans[i], v)
	}
	return v
}

// countJobs counts the states with a data job.
func countJobs(states map[string]job.SyncState) int {
	n := 0
	for _, st := range states {
		if st.Job != nil {
			n++
		}
	}
	return n
}
