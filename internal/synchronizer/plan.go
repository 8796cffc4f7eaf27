package synchronizer

import (
	"encoding/json"

	batchv1 "k8s.io/api/batch/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
)

// Action is the one thing a reconcile does to make the cluster match the database.
type Action string

// The actions of a plan, in the words `datajobs sync --once` prints.
const (
	ActionCreate    Action = "create"    // no CronJob yet: create it
	ActionUpdate    Action = "update"    // the desired deployment changed: apply it
	ActionSuspend   Action = "suspend"   // only enabled changed, to false
	ActionResume    Action = "resume"    // only enabled changed, to true
	ActionRepair    Action = "repair"    // someone edited the CronJob: revert it
	ActionReplace   Action = "replace"   // the CronJob belongs to an older incarnation of the name
	ActionAdopt     Action = "adopt"     // an imported CronJob, or one of ours from before installation labels: label it, no re-creation
	ActionRecord    Action = "record"    // the CronJob is right; only the database lags
	ActionDelete    Action = "delete"    // the deployment or job was deleted
	ActionOrphan    Action = "orphan"    // a CronJob of this installation no row in the database knows of
	ActionKeep      Action = "keep"      // an orphan kept: pruning it would be a mass prune (see Config.PruneMaxFraction)
	ActionRefuse    Action = "refuse"    // nothing written: the database looks restored from an older backup (restore.go)
	ActionWait      Action = "wait"      // the CronJob is being deleted: wait until it is gone
	ActionHold      Action = "hold"      // Kubernetes rejected this generation: wait for a change
	ActionVerify    Action = "verify"    // the CronJob changed since its write was recorded: read it to compare (the cache keeps no spec)
	ActionConflict  Action = "conflict"  // a CronJob datajobs does not manage has the name: left alone
	ActionUnchanged Action = "unchanged" // nothing to do
)

// Actions lists every action, in a stable order for summaries.
var Actions = []Action{
	ActionCreate, ActionUpdate, ActionSuspend, ActionResume, ActionRepair, ActionReplace, ActionAdopt,
	ActionRecord, ActionDelete, ActionOrphan, ActionKeep, ActionRefuse, ActionWait, ActionHold, ActionVerify, ActionConflict, ActionUnchanged,
}

// writesKubernetes reports whether the action changes the cluster.
func (a Action) writesKubernetes() bool {
	switch a {
	case ActionRecord, ActionKeep, ActionRefuse, ActionWait, ActionHold, ActionVerify, ActionConflict, ActionUnchanged:
		return false
	}
	return true
}

// Plan is what a reconcile decided for one job name, and from what.
type Plan struct {
	Name   string
	Action Action
	// Reason says why, for logs and the printed plan.
	Reason string
	State  job.SyncState
	Live   *batchv1.CronJob
	// Rendered and Hash are the CronJob the desired deployment renders to (nil without one).
	Rendered *batchv1.CronJob
	Hash     string
	// Resync asks for a full pass after this plan, which decide made: only a pass can
	// judge for the whole namespace (a restore suspected, an orphan no pass judged yet).
	Resync bool
	// TeamSecrets asks for the team Secrets' reconcile after this CronJob write, which may
	// change what they need (decide).
	TeamSecrets bool
}

// verified remembers, per job name, the state the leader last saw in agreement: the job
// incarnation and generation, whether its team had OAuth credentials (which the rendering
// reads besides the row), and the live CronJob's resourceVersion. While all four still
// hold, nothing can have changed, and a resync skips rendering and comparing.
type verified struct {
	uid             string
	generation      int64
	teamOAuth       bool
	resourceVersion string
}

// managed reports whether a CronJob carries datajobs' managed-by label, of any installation.
func managed(cj *batchv1.CronJob) bool {
	return cj != nil && cj.Labels[kube.LabelManagedBy] == kube.ManagedByValue
}

// owned reports whether the CronJob belongs to this installation, the only one whose
// CronJobs it writes or deletes: managed by datajobs and labelled with its installation
// id, or (made before installation labels) managed and rendered from a job incarnation
// this database knows. A managed CronJob of another installation, or an unlabelled one of
// a job this database never had, is as foreign as an unmanaged one.
func owned(cj *batchv1.CronJob, st job.SyncState, installation string) bool {
	if !managed(cj) {
		return false
	}
	if id, ok := cj.Labels[kube.LabelInstallation]; ok {
		return id == installation
	}
	return legacy(cj, st, installation)
}

// legacy is true for a CronJob of this installation made before installation labels:
// managed, unlabelled, and of a job incarnation the database knows.
func legacy(cj *batchv1.CronJob, st job.SyncState, installation string) bool {
	if _, ok := cj.Labels[kube.LabelInstallation]; ok || installation == "" || !managed(cj) {
		return false
	}
	uid := cj.Labels[kube.LabelJobUID]
	return uid != "" && ((st.Job != nil && st.Job.UID == uid) || (st.Actual != nil && st.Actual.JobUID == uid))
}

// plan decides the action for one job name. It is pure: it reads nothing and writes nothing.
// live is the CronJob of that name in the namespace, managed by datajobs or not.
func plan(st job.SyncState, live *batchv1.CronJob, cfg kube.RenderConfig, memo *verified) Plan {
	p := Plan{Name: st.Name, State: st, Live: live, Action: ActionUnchanged}
	if live != nil && !owned(live, st, cfg.Installation) {
		return planUnmanaged(p, cfg)
	}
	if st.Job == nil || st.Desired == nil {
		return planGone(p, live)
	}
	if st.Build != nil && st.Build.Hold != "" {
		p.Action, p.Reason = ActionHold, st.Build.Hold // build.go: the CronJob keeps its image meanwhile
		return p
	}
	j, d := st.Job, st.Desired
	gen := j.Generation
	if memo != nil && live != nil && inSync(st) && memo.uid == j.UID && memo.generation == gen && memo.teamOAuth == j.TeamOAuth && memo.resourceVersion == live.ResourceVersion {
		p.Reason = "verified"
		return p
	}
	p.Rendered, p.Hash = kube.Render(*j, *d, cfg)
	switch {
	case d.Status == job.StatusUserError && d.StatusGeneration == gen:
		p.Action, p.Reason = ActionHold, "Kubernetes rejected generation; waiting for a new deployment"
	case live == nil:
		p.Action, p.Reason = ActionCreate, "no CronJob"
	case live.DeletionTimestamp != nil:
		p.Action, p.Reason = ActionWait, "CronJob is being deleted; create it again once it is gone"
	case live.Labels[kube.LabelJobUID] != j.UID:
		p.Action, p.Reason = ActionReplace, "CronJob of an older incarnation of the job"
	case legacy(live, st, cfg.Installation):
		p.Action, p.Reason = ActionAdopt, "CronJob of this installation from before installation labels: label it"
	case untouched(st, live, p.Rendered, p.Hash):
		p.Reason = "up to date (CronJob generation as recorded)"
	default:
		p = planDrift(p, cfg)
	}
	return p
}

// planGone plans a name whose data job or desired deployment is gone: the CronJob, the
// actual row or the intent left behind is deleted, unless the CronJob is an orphan.
func planGone(p Plan, live *batchv1.CronJob) Plan {
	st := p.State
	switch {
	case live != nil && live.DeletionTimestamp != nil:
		p.Action, p.Reason = ActionWait, "CronJob is being deleted"
	// An orphan is a CronJob of which the database has no record at all, the only kind
	// the prune guard may hold back. One whose job UID an intent holds was written for a
	// job deleted before its applied row could be recorded: a delete the database asked
	// for (invariants 8 and 10).
	// A CronJob of a job whose team now runs in another target is a move's delete
	// (issue 44): the other target's shard creates it there.
	case live != nil && st.Elsewhere != nil && st.Elsewhere.JobUID == live.Labels[kube.LabelJobUID]:
		p.Action, p.Reason = ActionDelete, "the job's team runs in execution target "+st.Elsewhere.Target
	case live != nil && st.Job == nil && st.Actual == nil && !st.Intended(live.Labels[kube.LabelJobUID]):
		p.Action, p.Reason = ActionOrphan, "CronJob of this installation without a data job"
	case live != nil && st.Job == nil && st.Actual == nil:
		p.Action, p.Reason = ActionDelete, "data job deleted while its CronJob was written"
	case live != nil && st.Job == nil:
		p.Action, p.Reason = ActionDelete, "data job deleted"
	case live != nil:
		p.Action, p.Reason = ActionDelete, "deployment deleted"
	case st.Actual != nil:
		p.Action, p.Reason = ActionDelete, "CronJob gone; forget the actual deployment"
	case len(st.Intents) > 0:
		p.Action, p.Reason = ActionDelete, "CronJob gone; forget the intent to write it"
	}
	return p
}

// planDrift plans a live CronJob of the current incarnation that may differ from its
// rendering: record, repair, suspend or resume, update, or nothing.
func planDrift(p Plan, cfg kube.RenderConfig) Plan {
	st := p.State
	j, d := st.Job, st.Desired
	if kube.SpecDropped(p.Live) && p.Live.Annotations[kube.AnnotationHash] == p.Hash {
		return verify(p)
	}
	drifted, why := kube.Drifted(p.Live, p.Rendered)
	switch {
	case !drifted && !recorded(st, p.Hash):
		p.Action, p.Reason = ActionRecord, "CronJob up to date; database behind"
	case !drifted:
		p.Reason = "up to date"
	case p.Live.Annotations[kube.AnnotationHash] == p.Hash:
		p.Action, p.Reason = ActionRepair, "edited outside datajobs: "+why
	case onlyEnabledDiffers(*j, *d, cfg, p.Live):
		p.Action, p.Reason = ActionResume, "enabled"
		if !d.Enabled {
			p.Action, p.Reason = ActionSuspend, "disabled"
		}
	default:
		p.Action, p.Reason = ActionUpdate, why
	}
	return p
}

// verify is the plan of a CronJob whose spec must be compared but that the cache keeps
// without it (kube.Trim): execute reads it from the apiserver and plans again. It is the
// plan only where the cache cannot tell: the rendering's hash is the live one's (else the
// desired state changed, which needs no comparison), but the CronJob's generation or UID
// is not the one recorded (an edit by hand, a write whose record was lost, an older row).
func verify(p Plan) Plan {
	p.Action, p.Reason = ActionVerify, "CronJob changed since its write was recorded; read it to compare"
	return p
}

// inSync is true when the database already records the current generation as applied.
func inSync(st job.SyncState) bool {
	a, d := st.Actual, st.Desired
	return a != nil && d != nil && st.Job != nil && a.JobUID == st.Job.UID && a.Generation == st.Job.Generation &&
		d.Status == job.StatusSynced && d.StatusGeneration == st.Job.Generation
}

// recorded is true when the database records exactly this rendering as applied.
func recorded(st job.SyncState, hash string) bool {
	return inSync(st) && st.Actual.DeploymentVersionSHA == hash
}

// untouched is true when the live CronJob is, by Kubernetes' own account, the one last
// applied: the database records this very rendering as applied to this very object (its
// UID: a CronJob deleted and re-created, as by kubectl replace --force, starts again at
// generation 1) at its current metadata.generation (which Kubernetes bumps on every spec
// change and only then), and our labels and annotations are all there. It spares the field-by-field comparison of Drifted,
// the costliest part of a new leader's first pass.
func untouched(st job.SyncState, live, rendered *batchv1.CronJob, hash string) bool {
	a := st.Actual
	return recorded(st, hash) && a.CronJobGeneration != 0 && live.Generation == a.CronJobGeneration &&
		a.CronJobUID != "" && string(live.UID) == a.CronJobUID &&
		subsetOf(rendered.Labels, live.Labels) && subsetOf(rendered.Annotations, live.Annotations)
}

func subsetOf(want, got map[string]string) bool {
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			return false
		}
	}
	return true
}

// onlyEnabledDiffers is true when the live CronJob is exactly what the deployment renders
// to with the opposite enabled flag: the change is a suspend or a resume.
func onlyEnabledDiffers(j job.Job, d job.Deployment, cfg kube.RenderConfig, live *batchv1.CronJob) bool {
	d.Enabled = !d.Enabled
	// The live CronJob was rendered from an earlier revision of the row (none before
	// migration 0015): only the enabled flag and the revision may differ.
	j.Revision, _ = kube.Revision(live)
	_, flipped := kube.Render(j, d, cfg)
	return live.Annotations[kube.AnnotationHash] == flipped
}

// planUnmanaged plans for a name held by a CronJob this installation does not own
// (unmanaged, or of another installation): it is adopted if it is the very object an
// import recorded, and otherwise left alone.
func planUnmanaged(p Plan, cfg kube.RenderConfig) Plan {
	st, live := p.State, p.Live
	if st.Job == nil || st.Desired == nil {
		// Not ours and not wanted: as if it did not exist. An actual row left from an
		// earlier deployment of this name is forgotten once nothing of ours is there.
		p.Live = nil
		if st.Actual != nil || len(st.Intents) > 0 {
			p.Action, p.Reason = ActionDelete, "CronJob gone; forget the actual deployment"
		} else {
			p.Reason = "not managed by datajobs"
			if managed(live) {
				p.Reason = "managed by another datajobs installation"
			}
		}
		return p
	}
	p.Rendered, p.Hash = kube.Render(*st.Job, *st.Desired, cfg)
	if a := st.Desired.Adopted; a != nil && string(live.UID) == a.CronJobUID {
		var imported batchv1.CronJobSpec
		liveSpec, ok := kube.LiveSpec(live)
		if !ok {
			return verify(p)
		}
		if err := json.Unmarshal(a.Spec, &imported); err != nil || !apiequality.Semantic.DeepEqual(liveSpec, imported) {
			// Someone changed it since the import: adopting would overwrite that change.
			p.Action, p.Reason = ActionConflict, "the CronJob changed since it was imported; run datajobs import --overwrite"
			return p
		}
		if !apiequality.Semantic.DeepEqual(liveSpec, p.Rendered.Spec) {
			p.Action, p.Reason = ActionUpdate, "adopt the imported CronJob with the deployment changes made since the import"
			return p
		}
		p.Action, p.Reason = ActionAdopt, "imported CronJob: add labels and annotations"
		return p
	}
	p.Action, p.Reason = ActionConflict, "a CronJob not managed by datajobs has this name; it is left alone"
	if managed(live) {
		p.Reason = "a CronJob of another datajobs installation has this name; it is left alone"
	}
	return p
}
