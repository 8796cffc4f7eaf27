package tracker

import (
	"container/list"
	"context"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// What the tracker keeps beside the informers' caches, each by execution id and bounded
// by Config.MaxKept: the last state of deleted Jobs and of deleted pods (an
// informer forgets an object once it is deleted, and a Job deleted with its pod right
// after the pod ended still tells the outcome only by them), and the pods whose log is to
// be kept. An entry goes as soon as its execution is planned with its Job gone (the
// states) or its log is kept (the logs): normally within a second. States of an execution
// the term's view knows final are not kept at all (nothing is left to learn from them:
// the Jobs and pods the CronJob controller's history limits and TTLs delete every minute
// at 100,000 jobs). Past the bound the oldest entry goes, with a log line and a metric
// (datajobs_execution_states_dropped_total, datajobs_execution_logs_dropped_total): its
// execution is then recorded as far as the live objects show (a lost run, platform_error
// "execution record lost"; a log not kept, which the API answers 410), never silently.

// DefaultMaxKept is the default bound of each of the tracker's keeps.
const DefaultMaxKept = 10000

// kept is a map bounded to max entries that evicts the oldest first (by last put).
type kept[V any] struct {
	max   int
	items map[string]*list.Element
	order *list.List // of keptEntry[V], oldest first
}

type keptEntry[V any] struct {
	key string
	val V
}

func newKept[V any](max int) *kept[V] {
	return &kept[V]{max: max, items: map[string]*list.Element{}, order: list.New()}
}

// put stores v under key as the newest entry; past the bound it evicts the oldest one,
// whose key it returns (ok false: none).
func (k *kept[V]) put(key string, v V) (evicted string, ok bool) {
	if e, found := k.items[key]; found {
		e.Value = keptEntry[V]{key, v}
		k.order.MoveToBack(e)
		return "", false
	}
	k.items[key] = k.order.PushBack(keptEntry[V]{key, v})
	if k.order.Len() <= k.max {
		return "", false
	}
	oldest := k.order.Front()
	k.order.Remove(oldest)
	key = oldest.Value.(keptEntry[V]).key
	delete(k.items, key)
	return key, true
}

func (k *kept[V]) get(key string) (V, bool) {
	if e, ok := k.items[key]; ok {
		return e.Value.(keptEntry[V]).val, true
	}
	var zero V
	return zero, false
}

// take returns and removes the entry of key.
func (k *kept[V]) take(key string) (V, bool) {
	v, ok := k.get(key)
	if ok {
		k.order.Remove(k.items[key])
		delete(k.items, key)
	}
	return v, ok
}

func (k *kept[V]) len() int { return k.order.Len() }

// knownFinal reports whether the term's view holds a final status of execution id (t.mu held).
func (t *execTerm) knownFinal(id string) bool {
	r, ok := t.rows[id]
	return ok && r.Status.Final()
}

// underWay reports whether the term's view holds execution id as submitted or running.
func (t *execTerm) underWay(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.rows[id]
	return ok && !r.Status.Final()
}

// keepDeleted keeps the last state of the deleted Job id until its execution is planned,
// unless the view knows the execution final.
func (t *execTerm) keepDeleted(id string, j *batchv1.Job) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.knownFinal(id) {
		return
	}
	if gone, ok := t.deleted.put(id, j); ok {
		t.dropped(gone, "job")
	}
	t.x.cfg.Metrics.kept.WithLabelValues("deleted_job").Set(float64(t.deleted.len()))
}

// takeDeleted returns and forgets the last state of the deleted Job id, or nil.
func (t *execTerm) takeDeleted(id string) *batchv1.Job {
	t.mu.Lock()
	defer t.mu.Unlock()
	j, _ := t.deleted.take(id)
	t.x.cfg.Metrics.kept.WithLabelValues("deleted_job").Set(float64(t.deleted.len()))
	return j
}

// keepDeletedPod keeps the last state of a deleted pod of the Job id (the execution's)
// until its execution is planned with its Job gone, unless the view knows it final.
func (t *execTerm) keepDeletedPod(id string, p *corev1.Pod) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.knownFinal(id) {
		return
	}
	pods, _ := t.deletedPods.get(id)
	pods = append(slicesWithout(pods, p), p)
	if gone, ok := t.deletedPods.put(id, pods); ok {
		t.dropped(gone, "pod")
	}
	t.x.cfg.Metrics.kept.WithLabelValues("deleted_pod").Set(float64(t.deletedPods.len()))
}

// dropDeletedPods forgets the deleted pods kept for execution id.
func (t *execTerm) dropDeletedPods(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.deletedPods.take(id)
	t.x.cfg.Metrics.kept.WithLabelValues("deleted_pod").Set(float64(t.deletedPods.len()))
}

// deletedPodsOf returns the deleted pods kept for execution id.
func (t *execTerm) deletedPodsOf(id string) []*corev1.Pod {
	t.mu.Lock()
	defer t.mu.Unlock()
	pods, _ := t.deletedPods.get(id)
	return pods
}

// dropped tells that the kept state (kind job or pod) of execution id went past the
// bound: its outcome is read from what is still live (t.mu held).
func (t *execTerm) dropped(id, kind string) {
	t.x.cfg.Metrics.statesDropped.WithLabelValues(kind).Inc()
	t.x.log.Warn("execution_state_dropped", "execution", id, "kind", kind, "max_kept", t.x.cfg.MaxKept,
		"consequence", "its outcome is read from the live Job and pods only: a run whose Job and pods are gone is recorded lost")
}

// slicesWithout returns pods without the one of p's UID (a pod's newer state replaces it).
func slicesWithout(pods []*corev1.Pod, p *corev1.Pod) []*corev1.Pod {
	out := pods[:0:0]
	for _, q := range pods {
		if q.UID != p.UID {
			out = append(out, q)
		}
	}
	return out
}

// logDropped tells that the log of the finished execution id will not be kept: more than
// MaxKept logs waited to be read. Its log stays pending, which the API answers as not kept.
func (t *execTerm) logDropped(ctx context.Context, id string) {
	t.x.log.WarnContext(ctx, "execution_log_dropped", "execution", id, "max_kept", t.x.cfg.MaxKept)
	t.x.cfg.Metrics.logsDropped.Inc()
}
