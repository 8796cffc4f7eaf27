package tracker

import (
	"context"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/kube"
)

// The CronJobs the starts are made from. A start copies its job's CronJob's job template
// (kube.ExecutionJob); reading the CronJob from the apiserver for each start was one of its
// two round trips, the worker held meanwhile (bench/triggers at 100 starts a second: about
// 2,000 reads of 10 CronJobs, p50 137 ms each, the queue's mean wait 2.2 s). The term
// watches this installation's CronJobs, keeping of each only what tells whether a
// CronJob read before is still the one there (cronJobMeta); the CronJobs read are kept by
// name (templates) and started from again while the watch shows the same object at the
// same generation (its spec, the job template included, unchanged), of the start's job
// incarnation and not being deleted. Anything else — a CronJob the watch does not show
// (not there, or not seen yet), a new generation, another incarnation, a delete under way —
// is read from the apiserver, whose answer decides as before (kube.ErrNoCronJob). So a start
// runs the CronJob as the watch last showed it: a spec changed a moment ago (by a deploy's
// apply, itself applied after the deploy was answered) reaches the starts once its watch
// event does.

// templateCap bounds the CronJobs kept to start from: those of the jobs started most
// recently (one of a job started again after more than this many others is read again).
const templateCap = 1024

// templates holds the CronJobs read to start from, by name, the most recently used kept.
// It outlives the terms: an entry is used only while the term's watch shows it current.
type templates struct {
	mu   sync.Mutex
	kept *kept[*batchv1.CronJob]
}

func newTemplates() *templates { return &templates{kept: newKept[*batchv1.CronJob](templateCap)} }

func (s *templates) get(name string) *batchv1.CronJob {
	s.mu.Lock()
	defer s.mu.Unlock()
	cj, _ := s.kept.get(name)
	return cj
}

func (s *templates) put(cj *batchv1.CronJob) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kept.put(cj.Name, cj)
}

// cronJobMeta is the transform of the term's CronJob informer: of a CronJob only its name,
// UID, generation, job incarnation and delete under way (current). Idempotent.
func cronJobMeta(obj any) (any, error) {
	cj, ok := obj.(*batchv1.CronJob)
	if !ok {
		return obj, nil
	}
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: cj.Name, Namespace: cj.Namespace, UID: cj.UID, Generation: cj.Generation, ResourceVersion: cj.ResourceVersion,
		DeletionTimestamp: cj.DeletionTimestamp, Labels: map[string]string{kube.LabelJobUID: cj.Labels[kube.LabelJobUID]},
	}}, nil
}

// cronJob returns the CronJob name of job incarnation jobUID to start a run from: the one
// read before while the term's watch shows it current, else the apiserver's
// (kube.JobApplier.CronJob: kube.ErrNoCronJob when it is not there for that incarnation).
func (t *execTerm) cronJob(ctx context.Context, name, jobUID string) (*batchv1.CronJob, error) {
	if cj := t.x.templates.get(name); cj != nil && t.current(cj, jobUID) {
		return cj, nil
	}
	cj, err := t.x.jobs.CronJob(ctx, name, jobUID)
	if err != nil {
		return nil, err
	}
	t.x.templates.put(cj)
	return cj, nil
}

// current reports whether the term's watch shows cj, read before, as the CronJob there:
// the same object at the same generation, of job incarnation jobUID, not being deleted.
func (t *execTerm) current(cj *batchv1.CronJob, jobUID string) bool {
	m, ok := t.watched(cj.Namespace, cj.Name)
	return ok && m.GetUID() == cj.UID && m.GetGeneration() == cj.Generation &&
		m.GetDeletionTimestamp() == nil && m.GetLabels()[kube.LabelJobUID] == jobUID && cj.Labels[kube.LabelJobUID] == jobUID
}

// watched is what the watch shows of the CronJob namespace/name: the synchronizer's cache
// when the tracker reads it (Config.CronJobs; none between its terms), else the term's own.
func (t *execTerm) watched(namespace, name string) (metav1.Object, bool) {
	if t.cronJobs == nil {
		lister := t.x.cfg.CronJobs()
		if lister == nil {
			return nil, false
		}
		cj, err := lister.Get(name)
		return cj, err == nil
	}
	obj, ok, err := t.cronJobs.GetByKey(namespace + "/" + name)
	m, isMeta := obj.(*metav1.PartialObjectMetadata)
	return m, err == nil && ok && isMeta
}
