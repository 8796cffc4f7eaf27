package synchronizer

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/leader"
)

// execute carries out a decided plan (decide.go): the Kubernetes write first, then the
// database record of it, conditioned on the generation the plan was made for. In dry-run
// mode it only logs. An error is retried with backoff; a result without one says whether
// and when to look again.
func (t *term) execute(ctx context.Context, p Plan) (controller.Result, error) {
	s := t.s
	// op_id ties this write's lines together; it has the form of the API's op ids.
	log := s.log.With("job", p.Name, "action", string(p.Action), "op_id", rand.Text())
	if p.State.Job != nil {
		log = log.With("generation", p.State.Job.Generation)
	}
	s.recordPlan(p)
	switch p.Action {
	case ActionUnchanged:
		s.rememberUnchanged(p)
		s.metrics.reconciled(string(p.Action), nil)
		return controller.Result{}, nil
	case ActionHold:
		s.metrics.reconciled(string(p.Action), nil)
		return controller.Result{Terminal: true}, nil
	case ActionKeep, ActionRefuse:
		// The pass that refused the prune or the restore logged it; the next pass decides again.
		s.metrics.reconciled(string(p.Action), nil)
		return controller.Result{Terminal: true}, nil
	case ActionWait:
		// The informer's delete event brings the name back; the requeue is for a missed one.
		s.metrics.reconciled(string(p.Action), nil)
		return controller.Result{RequeueAfter: s.cfg.RetryMax}, nil
	}
	if s.cfg.DryRun {
		log.InfoContext(ctx, "sync_planned", "reason", p.Reason)
		s.metrics.reconciled(string(p.Action), nil)
		return controller.Result{Terminal: p.Action == ActionConflict}, nil
	}
	start := time.Now()
	finish := func(res controller.Result, err error) (controller.Result, error) {
		s.metrics.reconciled(string(p.Action), err)
		switch {
		case err != nil:
			log.WarnContext(ctx, "sync_failed", "reason", p.Reason, "error", err)
		case res.Retry:
			log.InfoContext(ctx, "sync_replan", "reason", p.Reason)
		default:
			log.InfoContext(ctx, "synced", "reason", p.Reason, "duration", time.Since(start))
		}
		return res, err
	}
	switch p.Action {
	case ActionConflict:
		return finish(t.conflict(ctx, p))
	case ActionDelete, ActionOrphan:
		return finish(t.delete(ctx, p))
	default:
		return t.apply(ctx, p, finish)
	}
}

// resolve turns a verify plan into the plan of the CronJob as the apiserver has it, whole
// (the cache keeps no spec to compare); any other plan it returns as it is. The plan
// from the whole object is never verify again.
func (t *term) resolve(ctx context.Context, p Plan) (Plan, error) {
	if p.Action != ActionVerify {
		return p, nil
	}
	cj, err := t.s.client.BatchV1().CronJobs(t.render.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cj = nil
	case err != nil:
		t.s.metrics.reconciled(string(p.Action), err)
		return p, fmt.Errorf("read cronjob %s to compare it: %w", p.Name, err)
	}
	return plan(p.State, cj, t.render, nil), nil
}

// replan is the result of a write computed from a view that turned out stale: the
// apiserver refused it (a resourceVersion or UID precondition, or a name taken
// meanwhile), or the desired state changed before it could be recorded. The name is
// planned again once the cache has caught up.
func (t *term) replan() controller.Result { return controller.Result{Retry: true} }

// stale reports whether the apiserver refused a write because the caller's view of the
// CronJob is out of date.
func stale(err error) bool { return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) }

// apply makes the CronJob match the rendering and records it, or records why it could not.
// finish logs and counts the outcome; apply calls it with the outcome, now or (when the
// row is handed over to the term's recorder) once the row is written, and then returns
// controller.Result{HandedOver: true}.
func (t *term) apply(ctx context.Context, p Plan, finish func(controller.Result, error) (controller.Result, error)) (controller.Result, error) {
	s := t.s
	j, d := p.State.Job, p.State.Desired
	applied := p.Live
	if p.Action != ActionRecord {
		t.ensureServiceAccount(ctx, p.Rendered)
	}
	if res, ok, err := t.intend(ctx, p); !ok {
		return finish(res, err)
	}
	var err error
	switch p.Action {
	case ActionReplace:
		t.beginWrite(p.Name)
		applied, err = s.applier.Replace(ctx, p.Live, p.Rendered)
		t.endWrite(p.Name, written(applied, err))
	case ActionRecord:
	default:
		t.beginWrite(p.Name)
		applied, err = t.write(ctx, p)
		t.endWrite(p.Name, written(applied, err))
	}
	if err != nil && stale(err) {
		return finish(t.replan(), nil)
	}
	if errors.Is(err, leader.ErrTermOver) {
		// Not the job's failure, and no longer ours to record: the next leader plans it.
		return finish(controller.Result{}, fmt.Errorf("%s cronjob %s: %w", p.Action, p.Name, err))
	}
	if err != nil {
		return finish(t.failed(ctx, p, err))
	}
	if p.Action == ActionRepair {
		s.metrics.driftRepairs.Inc()
	}
	if p.Action.writesKubernetes() {
		s.metrics.observeLag(changedAt(p))
	}
	// Kubernetes confirmed the write: only now is it recorded.
	eff := s.cfg.Render.Resources.Effective(d.Resources)
	a := job.ActualDeployment{
		JobName: j.Name, JobUID: j.UID, Generation: j.Generation, Team: j.Team,
		DeploymentVersionSHA: p.Hash, JobVersion: d.JobVersion, VDKVersion: d.VDKVersion,
		PythonVersion: d.PythonVersion, Schedule: d.Schedule, Resources: eff, Enabled: d.Enabled,
		DeployedBy: d.DeployedBy, DeployedDate: appliedAt(p, applied, s.cfg.Now),
		CronJobGeneration: applied.Generation, CronJobUID: string(applied.UID), Image: kube.CronJobImage(applied),
	}
	recorded := func(wrote bool, err error) (controller.Result, error) {
		if err != nil {
			return controller.Result{}, fmt.Errorf("record applied cronjob %s: %w", p.Name, err)
		}
		if !wrote {
			// The desired state moved on (or the term ended) while applying: plan again.
			s.remember(p.Name, nil)
			return t.replan(), nil
		}
		s.remember(p.Name, &verified{uid: j.UID, generation: j.Generation, teamOAuth: j.TeamOAuth, resourceVersion: applied.ResourceVersion})
		return controller.Result{}, nil
	}
	if t.records == nil { // a single pass (RunOnce): write it now
		wrote, err := s.db.RecordAppliedAll(ctx, t.fence, []job.ActualDeployment{a})
		return finish(recorded(len(wrote) == 1 && wrote[0], err))
	}
	t.records.add(a, func(wrote bool, err error) {
		res, err := finish(recorded(wrote, err))
		t.finish(ctx, p.Name, res, err)
	})
	return controller.Result{HandedOver: true}, nil
}

// write makes p's CronJob match its rendering. A create (p.Live nil) only creates: the
// plan saw no CronJob of this name in the cache, and if one appeared meanwhile the
// apiserver refuses, and nothing is taken over. It is by apply, so that the CronJob's
// first change is one apply, unless a backlog waits (a new leader's catch-up, a converge):
// then it is the cheaper plain create, and the first change, if any, hands the fields
// over to the apply manager. Every other write is conditioned on the resourceVersion
// planned from.
func (t *term) write(ctx context.Context, p Plan) (*batchv1.CronJob, error) {
	if p.Live == nil && t.backlogged() {
		return t.s.applier.CreatePlainly(ctx, p.Rendered)
	}
	return t.s.applier.Apply(ctx, p.Live, p.Rendered)
}

// backlogged reports whether more names wait than the workers take at once: then creates
// are plain (Applier.CreatePlainly), the cheaper write for catching up.
func (t *term) backlogged() bool { return t.queue.Len() > t.s.cfg.Workers }

// written is the object a write returned, nil if it failed.
func written(cj *batchv1.CronJob, err error) *batchv1.CronJob {
	if err != nil {
		return nil
	}
	return cj
}

// failed records why Kubernetes refused or failed a write, as the user will read it.
func (t *term) failed(ctx context.Context, p Plan, err error) (controller.Result, error) {
	j := p.State.Job
	status := job.StatusPlatformError
	if kube.IsUserError(err) {
		status = job.StatusUserError
	}
	if _, recErr := t.s.db.RecordUnappliedStatus(ctx, t.fence, j.Name, j.UID, j.Generation, status, failureMessage(p, err)); recErr != nil {
		return controller.Result{}, fmt.Errorf("%s cronjob %s: %w (and recording the failure: %w)", p.Action, p.Name, err, recErr)
	}
	if status == job.StatusUserError {
		// Not retried until the desired state changes: the next NOTIFY brings it back.
		return controller.Result{Terminal: true}, nil
	}
	return controller.Result{}, fmt.Errorf("%s cronjob %s: %w", p.Action, p.Name, err)
}

// delete removes the CronJob (if any), confirms with the apiserver that it is gone, and
// only then forgets the actual deployment.
func (t *term) delete(ctx context.Context, p Plan) (controller.Result, error) {
	s := t.s
	if p.Live != nil {
		if err := s.applier.Delete(ctx, p.Live); err != nil {
			if stale(err) {
				return t.replan(), nil // changed, or another incarnation took the name meanwhile
			}
			return controller.Result{}, fmt.Errorf("delete cronjob %s: %w", p.Name, err)
		}
		if p.Action == ActionOrphan {
			s.metrics.orphansRemoved.Inc()
		}
	}
	for _, uid := range forgettable(p.State) {
		gone, err := s.applier.Gone(ctx, p.Name, uid)
		if err != nil {
			return controller.Result{}, fmt.Errorf("confirm cronjob %s is gone: %w", p.Name, err)
		}
		switch {
		case !gone && p.Live == nil:
			// The cache has not seen the CronJob yet (a create whose applied row could not be
			// recorded: its informer event is the echo of our own write and queues nothing).
			return t.replan(), nil
		case !gone:
			// Still being deleted (the garbage collector orphans its Jobs first): its delete
			// event brings the name back.
			return controller.Result{RequeueAfter: s.cfg.RetryMax}, nil
		}
		if _, err := s.db.DeleteActual(ctx, t.fence, p.Name, uid); err != nil {
			return controller.Result{}, err
		}
	}
	s.remember(p.Name, nil)
	return controller.Result{}, nil
}

// forgettable lists the job incarnations of a name whose CronJob the database remembers
// (its actual row, its intents): a delete is planned only for a name without a deployment,
// so none of them is wanted, and each is forgotten once the apiserver confirms that no
// CronJob of it is left.
func forgettable(st job.SyncState) []string {
	var uids []string
	if st.Actual != nil {
		uids = append(uids, st.Actual.JobUID)
	}
	for _, uid := range st.Intents {
		if st.Actual == nil || st.Actual.JobUID != uid {
			uids = append(uids, uid)
		}
	}
	return uids
}

// failureMessage is what the user reads in the deployment's message.
func failureMessage(p Plan, err error) string {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		return fmt.Sprintf("Kubernetes refused to %s the CronJob: %s", p.Action, se.Status().Message)
	}
	return fmt.Sprintf("could not %s the CronJob: %v", p.Action, err)
}

// changedAt is when the desired change being applied was committed.
func changedAt(p Plan) time.Time {
	at := p.State.Job.UpdatedAt
	if d := p.State.Desired; d != nil && d.DeployedDate.After(at) {
		at = d.DeployedDate
	}
	return at
}

// appliedAt is the deployed date of the actual row: when the CronJob last changed.
func appliedAt(p Plan, applied *batchv1.CronJob, now func() time.Time) time.Time {
	if p.Action == ActionRecord && p.State.Actual != nil && p.State.Actual.JobUID == p.State.Job.UID {
		return p.State.Actual.DeployedDate
	}
	if p.Action == ActionRecord && applied != nil {
		return applied.CreationTimestamp.Time
	}
	return now()
}

// conflict records that a CronJob datajobs does not manage holds the job's name. It is not
// retried: an informer event on that CronJob (deleted, or relabelled) brings the job back.
func (t *term) conflict(ctx context.Context, p Plan) (controller.Result, error) {
	j := p.State.Job
	msg := fmt.Sprintf("a CronJob named %s exists in namespace %s and is not managed by datajobs; it is left alone", p.Name, t.s.cfg.Render.Namespace)
	if id := p.Live.Labels[kube.LabelInstallation]; managed(p.Live) && id != "" {
		msg = fmt.Sprintf("a CronJob named %s exists in namespace %s and belongs to another datajobs installation (%s=%s); it is left alone",
			p.Name, t.s.cfg.Render.Namespace, kube.LabelInstallation, id)
	} else if managed(p.Live) {
		msg = fmt.Sprintf("a CronJob named %s exists in namespace %s, made by datajobs for a job this installation never had (another datajobs installation); it is left alone",
			p.Name, t.s.cfg.Render.Namespace)
	}
	if _, err := t.s.db.RecordUnappliedStatus(ctx, t.fence, j.Name, j.UID, j.Generation, job.StatusPlatformError, msg); err != nil {
		return controller.Result{}, err
	}
	return controller.Result{Terminal: true}, nil
}
