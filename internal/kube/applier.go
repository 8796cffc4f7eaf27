package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	batchv1ac "k8s.io/client-go/applyconfigurations/batch/v1"
	typedbatchv1 "k8s.io/client-go/kubernetes/typed/batch/v1"
	"k8s.io/client-go/util/csaupgrade"
)

// Applier writes rendered CronJobs to its Writer's namespace (Writer.CronJobs). It is
// the only code that changes CronJobs; every write is made as field manager FieldManager,
// after the Writer's fence allowed it, and every write is conditioned on what the caller
// last saw: a new CronJob is created by an apply that only creates, or by a plain create
// (CreatePlainly; either fails with AlreadyExists rather than take over an object of that
// name), and an update or delete carries the resourceVersion of the object the caller
// planned from (the apiserver answers Conflict when it has changed since).
type Applier struct {
	w *Writer
}

func (a *Applier) cronJobs() typedbatchv1.CronJobInterface {
	return a.w.client.BatchV1().CronJobs(a.w.namespace)
}

// Apply makes the CronJob in the cluster equal to cj and returns the object the
// apiserver stored. live is the CronJob the caller planned from (nil: there is none).
//
// Without live it creates cj (by an apply that only creates, see create): if an object of
// that name appeared meanwhile (the caller's cache lagged), it fails with an error for
// which apierrors.IsAlreadyExists is true and nothing is written. With live it uses server-side
// apply with force, which updates and takes back fields another manager changed, with
// live's resourceVersion as a precondition (an error for which apierrors.IsConflict is
// true means the object changed since the caller saw it); applying an unchanged object
// writes nothing. When someone added spec fields datajobs never renders, which apply
// cannot remove, it follows with a full update of the spec (guarded by the
// resourceVersion it just read). An error for which IsUserError is true means the spec
// itself is invalid.
func (a *Applier) Apply(ctx context.Context, live, cj *batchv1.CronJob) (*batchv1.CronJob, error) {
	if live == nil {
		return a.create(ctx, cj)
	}
	live, err := a.ownCreated(ctx, live)
	if err != nil {
		return nil, fmt.Errorf("apply cronjob %s: %w", cj.Name, err)
	}
	ac, err := applyConfiguration(cj)
	if err != nil {
		return nil, fmt.Errorf("apply cronjob %s: %w", cj.Name, err)
	}
	ac.WithResourceVersion(live.ResourceVersion)
	got, err := a.serverSideApply(ctx, ac, true)
	if err != nil {
		return nil, fmt.Errorf("apply cronjob %s: %w", cj.Name, err)
	}
	if drifted, _ := Drifted(got, cj); !drifted {
		return got, nil
	}
	up := got.DeepCopy()
	up.Spec = *cj.Spec.DeepCopy()
	up.Labels = merged(up.Labels, cj.Labels)
	up.Annotations = merged(up.Annotations, cj.Annotations)
	got, err = fenced(ctx, a.w, func() (*batchv1.CronJob, error) {
		return a.cronJobs().Update(ctx, up, metav1.UpdateOptions{FieldManager: FieldManager})
	})
	if err != nil {
		return nil, fmt.Errorf("update cronjob %s: %w", cj.Name, err)
	}
	if drifted, reason := Drifted(got, cj); drifted {
		// A mutating webhook or policy keeps changing what we write; retrying would loop.
		return got, fmt.Errorf("update cronjob %s: still differs after update: %s", cj.Name, reason)
	}
	return got, nil
}

// ownCreated hands the fields datajobs wrote with a full update (or a plain create, as
// datajobs created CronJobs before it created them by apply), which managedFields record
// as an Update operation, to its server-side apply manager, so that an apply removes
// whatever datajobs stops rendering. It is what client-go's csaupgrade does: one JSON
// patch, conditioned on live's resourceVersion, the first time such an object is
// changed; nothing when there is nothing to hand over. From an informer cache whose
// managedFields Trim reduced to a marker, when datajobs' one entry is that Update entry
// (a CronJob it created so and never applied since), the patch renames the
// entry's operation to Apply in place, by its index, without reading the object: the
// resourceVersion precondition guarantees the list is the one the marker was made from.
// Otherwise (datajobs holds an Apply entry too, to merge with) the object is read again
// first: csaupgrade's patch replaces the whole list and must be computed from it. Either
// stays conditioned on live's resourceVersion, so an object changed since the caller saw
// it is not written.
func (a *Applier) ownCreated(ctx context.Context, live *batchv1.CronJob) (*batchv1.CronJob, error) {
	var patch []byte
	switch i, rename := handOverIndex(live.ManagedFields); {
	case managedFieldsTrimmed(live.ManagedFields) && rename:
		patch = fmt.Appendf(nil, `[{"op":"replace","path":"/metadata/managedFields/%d/operation","value":%q},`+
			`{"op":"replace","path":"/metadata/resourceVersion","value":%q}]`, i, metav1.ManagedFieldsOperationApply, live.ResourceVersion)
	case managedFieldsTrimmed(live.ManagedFields):
		cur, err := a.cronJobs().Get(ctx, live.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		cur.ResourceVersion = live.ResourceVersion
		live = cur
		fallthrough
	default:
		var err error
		if patch, err = csaupgrade.UpgradeManagedFieldsPatch(live, sets.New(FieldManager), FieldManager); err != nil || patch == nil {
			return live, err
		}
	}
	return fenced(ctx, a.w, func() (*batchv1.CronJob, error) {
		return a.cronJobs().Patch(ctx, live.Name, types.JSONPatchType, patch, metav1.PatchOptions{})
	})
}

// create creates cj by server-side apply, so that datajobs' apply manager owns its fields
// from the start and the CronJob's first change is one apply like every later one: a plain
// create records them as an Update entry, which the first change had to hand over with a
// write of its own (ownCreated; issue 28: two writes per first change, the apiserver's
// limit at 200 changes a second). The apply carries absentVersion as its resourceVersion
// precondition: where no object of the name exists the apiserver creates one (in one
// storage transaction conditioned on the name being free), and where one exists (it
// appeared since the caller's cache looked) the precondition fails and nothing is taken
// over; create reports that as AlreadyExists, as a plain create would. Without force, so
// that the apply could not take another manager's field even then.
func (a *Applier) create(ctx context.Context, cj *batchv1.CronJob) (*batchv1.CronJob, error) {
	ac, err := applyConfiguration(cj)
	if err != nil {
		return nil, fmt.Errorf("create cronjob %s: %w", cj.Name, err)
	}
	ac.WithResourceVersion(absentVersion)
	got, err := a.serverSideApply(ctx, ac, false)
	if apierrors.IsConflict(err) {
		err = apierrors.NewAlreadyExists(batchv1.Resource("cronjobs"), cj.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("create cronjob %s: %w", cj.Name, err)
	}
	return got, nil
}

// serverSideApply sends ac as a server-side apply by field manager FieldManager: what
// client-go's typed Apply sends, with one option its ApplyOptions cannot carry,
// fieldValidation Ignore. Under the apiserver's default (Warn) it parses the apply body
// twice, the second time strictly, only to warn of unknown or duplicate fields, which a
// body marshalled from the typed API cannot have: that second YAML parse was 13 % of an
// apply's apiserver CPU (1.2 of 8.7 ms a change, issue 28). Values are validated either way.
func (a *Applier) serverSideApply(ctx context.Context, ac *batchv1ac.CronJobApplyConfiguration, force bool) (*batchv1.CronJob, error) {
	if ac.Name == nil {
		return nil, fmt.Errorf("apply configuration without a name")
	}
	body, err := json.Marshal(ac)
	if err != nil {
		return nil, fmt.Errorf("marshal apply configuration: %w", err)
	}
	return fenced(ctx, a.w, func() (*batchv1.CronJob, error) {
		return a.cronJobs().Patch(ctx, *ac.Name, types.ApplyPatchType, body, metav1.PatchOptions{
			FieldManager: FieldManager, Force: &force, FieldValidation: metav1.FieldValidationIgnore,
		})
	})
}

// CreatePlainly creates cj with a plain create, which fails with AlreadyExists rather than
// take over an object of that name. It costs the apiserver about a third of what a create
// by apply does (a failover with 1,000 creates pending under two CPU hogs, in one hour:
// 3.1-3.7 s of apiserver CPU with creates plain behind the backlog, against 5.5 s by
// apply; all applied 14-15 s after the freeze, against 17.3 s), and records datajobs'
// fields as its Update entry, which the CronJob's first change hands over to the apply
// manager (ownCreated): the synchronizer creates so when it has a backlog to catch up.
func (a *Applier) CreatePlainly(ctx context.Context, cj *batchv1.CronJob) (*batchv1.CronJob, error) {
	got, err := fenced(ctx, a.w, func() (*batchv1.CronJob, error) {
		return a.cronJobs().Create(ctx, cj, metav1.CreateOptions{FieldManager: FieldManager})
	})
	if err != nil {
		return nil, fmt.Errorf("create cronjob %s: %w", cj.Name, err)
	}
	return got, nil
}

// absentVersion is a resourceVersion no stored object has: etcd numbers its revisions
// from 1, the empty store's, so its first write is revision 2, and the apiserver stores
// its own objects (namespaces, roles) before anyone can create a CronJob. As an apply's
// precondition it means "there is no such object yet".
const absentVersion = "1"

// Replace swaps live, a CronJob of an older incarnation of the job (another job UID), for
// cj: it deletes live, with preconditions on its UID and resourceVersion so that nothing
// newer or changed is deleted, and then creates cj. The old incarnation's Jobs go with it
// (Background propagation: the job they ran for was deleted), so the name is usually free
// at once. If the old object is still there (it has finalizers), the create fails with an
// error for which apierrors.IsAlreadyExists is true, and the caller waits for it to go.
func (a *Applier) Replace(ctx context.Context, live, cj *batchv1.CronJob) (*batchv1.CronJob, error) {
	if err := a.delete(ctx, live, metav1.DeletePropagationBackground); err != nil {
		return nil, fmt.Errorf("replace cronjob %s: %w", live.Name, err)
	}
	got, err := a.create(ctx, cj)
	if err != nil {
		return nil, fmt.Errorf("replace cronjob %s: %w", live.Name, err)
	}
	return got, nil
}

// Delete deletes live, if the CronJob of that name still is that object, unchanged since
// (preconditions on its UID and resourceVersion). A missing CronJob counts as deleted. A
// failed precondition returns an error for which apierrors.IsConflict is true: the object
// was changed or replaced since the caller saw it.
//
// Propagation is Orphan: executions already running are left to finish. The garbage
// collector (kube-controller-manager) removes the CronJob's ownership of its Jobs and then
// the CronJob itself; the Jobs are cleaned up by their own ttlSecondsAfterFinished. Until
// then the CronJob is still there with a deletion timestamp, and callers that need it gone
// check with Gone. docs/cronjob.md compares the other policies.
func (a *Applier) Delete(ctx context.Context, live *batchv1.CronJob) error {
	return a.delete(ctx, live, metav1.DeletePropagationOrphan)
}

func (a *Applier) delete(ctx context.Context, live *batchv1.CronJob, policy metav1.DeletionPropagation) error {
	opts := metav1.DeleteOptions{PropagationPolicy: &policy, Preconditions: &metav1.Preconditions{}}
	if live.UID != "" {
		opts.Preconditions.UID = &live.UID
	}
	if live.ResourceVersion != "" {
		opts.Preconditions.ResourceVersion = &live.ResourceVersion
	}
	err := fencedErr(ctx, a.w, func() error { return a.cronJobs().Delete(ctx, live.Name, opts) })
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete cronjob %s: %w", live.Name, err)
	}
	return nil
}

// Gone asks the apiserver (not a cache) whether the CronJob name of the job incarnation
// jobUID is gone: true when there is no CronJob of that name, or one of another job's.
// A CronJob still being deleted (a finalizer, or the garbage collector orphaning its
// Jobs) is not gone.
func (a *Applier) Gone(ctx context.Context, name, jobUID string) (bool, error) {
	ofAnotherJob := func(cj *batchv1.CronJob) bool { return cj.Labels[LabelJobUID] != jobUID }
	return gone(ctx, a.cronJobs().Get, "cronjob", name, ofAnotherJob)
}

// gone reads the object name of a kind with get, from the apiserver: gone when there is
// none, else when other says the one found is not the caller's (another object of that
// name).
func gone[T any](
	ctx context.Context, get func(context.Context, string, metav1.GetOptions) (T, error), kind, name string, other func(T) bool,
) (bool, error) {
	cur, err := get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("get %s %s: %w", kind, name, err)
	}
	return other(cur), nil
}

// IsUserError reports whether err says the rendered spec is invalid (422 Invalid or 400
// BadRequest): the deployment is then a user_error, not retried until it changes.
// Every other error is a platform error, retried with backoff.
func IsUserError(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)
}

// applyConfiguration converts a typed CronJob into an apply configuration. Apply
// configurations omit every unset field, so only what Render set is sent and owned.
func applyConfiguration(cj *batchv1.CronJob) (*batchv1ac.CronJobApplyConfiguration, error) {
	b, err := json.Marshal(cj)
	if err != nil {
		return nil, fmt.Errorf("marshal: %w", err)
	}
	ac := &batchv1ac.CronJobApplyConfiguration{}
	if err := json.Unmarshal(b, ac); err != nil {
		return nil, fmt.Errorf("unmarshal apply configuration: %w", err)
	}
	ac.Status = nil
	ac.WithAPIVersion("batch/v1").WithKind("CronJob")
	return ac, nil
}

func merged(base, over map[string]string) map[string]string {
	out := maps.Clone(base)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, over)
	return out
}
