package tracker

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/store"
)

// podsByJobIndex indexes the cached pods by the name of their Job (the execution id).
const podsByJobIndex = "job-name"

// startTerm starts a term's informers on this installation's Jobs, their pods and, unless
// it reads the synchronizer's (Config.CronJobs), their CronJobs (of those only what
// cronJobMeta keeps), and waits for their caches; stop ends them.
func (x *Tracker) startTerm(ctx context.Context, epoch int64) (*execTerm, func(), error) {
	factory := informers.NewSharedInformerFactoryWithOptions(x.client, 0, informers.WithNamespace(x.cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = kube.ManagedSelector().String() }),
		informers.WithTransform(kube.Trim)) // only what ObserveExecution and the tracker read
	jobInformer := factory.Batch().V1().Jobs()
	podInformer := factory.Core().V1().Pods()
	synced := []cache.InformerSynced{jobInformer.Informer().HasSynced, podInformer.Informer().HasSynced}
	var cronJobs cache.Indexer
	if x.cfg.CronJobs == nil {
		cronJobInformer := factory.Batch().V1().CronJobs().Informer()
		if err := cronJobInformer.SetTransform(cronJobMeta); err != nil {
			return nil, nil, fmt.Errorf("trim cronjobs: %w", err)
		}
		cronJobs, synced = cronJobInformer.GetIndexer(), append(synced, cronJobInformer.HasSynced)
	}
	if err := podInformer.Informer().AddIndexers(cache.Indexers{podsByJobIndex: func(obj any) ([]string, error) {
		if p, ok := obj.(*corev1.Pod); ok && p.Labels[kube.LabelJobName] != "" {
			return []string{p.Labels[kube.LabelJobName]}, nil
		}
		return nil, nil
	}}); err != nil {
		return nil, nil, fmt.Errorf("index pods: %w", err)
	}
	m := x.cfg.Metrics
	t := &execTerm{
		x: x, fence: job.Fence{Epoch: epoch}, jobs: jobInformer.Lister().Jobs(x.cfg.Namespace),
		pods: podInformer.Informer().GetIndexer(), cronJobs: cronJobs,
		queue: controller.NewQueue(m.queue, controller.Exponential(200*time.Millisecond, time.Minute), x.log, "execution", "execution_sync_failed"),
		seen:  map[string]time.Time{}, deleted: newKept[*batchv1.Job](x.cfg.MaxKept),
		deletedPods: newKept[[]*corev1.Pod](x.cfg.MaxKept),
		rows:        map[string]job.TrackedExecution{}, stale: map[string]bool{},
		logPods:  newKept[*attempts](x.cfg.MaxKept),
		logQueue: controller.NewQueue(m.logQueue, controller.Exponential(time.Second, time.Minute), x.log, "execution", "execution_log_store_failed"),
	}
	t.writes = t.newStatusWriter()
	for _, kind := range []string{"deleted_job", "deleted_pod", "log"} {
		m.kept.WithLabelValues(kind).Set(0) // a new term keeps nothing of the last one's
	}
	shutDown := func() {
		t.queue.ShutDown()
		t.logQueue.ShutDown()
	}
	if err := t.watch(jobInformer.Informer(), podInformer.Informer()); err != nil {
		shutDown()
		return nil, nil, err
	}
	informerCtx, cancel := context.WithCancel(ctx)
	factory.Start(informerCtx.Done())
	stop := func() {
		cancel()
		factory.Shutdown()
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		shutDown()
		stop()
		return nil, nil, fmt.Errorf("wait for job, pod and cronjob caches: %w", context.Cause(ctx))
	}
	return t, stop, nil
}

// watch queues the execution of every Job and Pod event after the initial list (which
// the first pass covers), keeping the last state of a deleted Job or pod (the delete
// event carries it, or a tombstone its last known state): a Job and its pod deleted
// right after the pod ended, before the tracker looked, still tell the outcome.
func (t *execTerm) watch(jobs, pods cache.SharedIndexInformer) error {
	onJob := func(obj any) {
		if j, ok := obj.(*batchv1.Job); ok {
			t.enqueue(j.Name)
		}
	}
	onJobDeleted := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if j, ok := obj.(*batchv1.Job); ok {
			t.keepDeleted(j.Name, j)
			t.enqueue(j.Name)
		}
	}
	onPod := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok && p.Labels[kube.LabelJobName] != "" {
			t.enqueue(p.Labels[kube.LabelJobName])
		}
	}
	onPodDeleted := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if p, ok := obj.(*corev1.Pod); ok && p.Labels[kube.LabelJobName] != "" {
			t.keepDeletedPod(p.Labels[kube.LabelJobName], p)
			t.enqueue(p.Labels[kube.LabelJobName])
		}
	}
	handlers := []cache.SharedIndexInformer{jobs, pods}
	for i, h := range [][2]func(any){{onJob, onJobDeleted}, {onPod, onPodDeleted}} {
		if _, err := handlers[i].AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
			AddFunc: func(obj any, initial bool) {
				if !initial {
					h[0](obj)
				}
			},
			UpdateFunc: func(_, obj any) { h[0](obj) },
			DeleteFunc: h[1],
		}); err != nil {
			return fmt.Errorf("watch executions: %w", err)
		}
	}
	return nil
}

// enqueue queues an execution id, remembering when its first unhandled event was seen.
func (t *execTerm) enqueue(id string) {
	t.mu.Lock()
	if _, ok := t.seen[id]; !ok {
		t.seen[id] = time.Now()
	}
	t.mu.Unlock()
	t.queue.Add(id)
}

// takeSeen returns and forgets when the pending events of id were first seen.
func (t *execTerm) takeSeen(id string) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.seen[id]
	delete(t.seen, id)
	return s
}

// enqueueSeen puts back when the events of id were first seen, after a failed write.
func (t *execTerm) enqueueSeen(id string, seen time.Time) {
	if seen.IsZero() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.seen[id]; !ok {
		t.seen[id] = seen
	}
}

// live returns the Job id from the cache, or nil.
func (t *execTerm) live(id string) (*batchv1.Job, error) {
	j, err := t.jobs.Get(id)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read job %s from cache: %w", id, err)
	}
	return j, nil
}

// podsNamed returns the cached pods of the Job named id, of whichever Job of that name
// (planExecution keeps those of the Job it looks at: controlledBy).
func (t *execTerm) podsNamed(id string) []*corev1.Pod {
	objs, err := t.pods.ByIndex(podsByJobIndex, id)
	if err != nil {
		return nil // the index exists from the start of the term
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	return pods
}

// listen queues every execution id NOTIFYed by the API, reconnecting with backoff; each
// reconnection queues a pass for what it may have missed. It closes listening once it
// listens the first time.
func (t *execTerm) listen(ctx context.Context, listening chan struct{}) {
	controller.Listen(ctx, t.x.db, store.ExecutionsChannel, 500*time.Millisecond, t.x.log, func(first bool) {
		if first {
			close(listening)
		} else {
			t.queue.Add(resyncKey)
		}
	}, func(id string) {
		t.markStale(id)
		t.queue.Add(id)
	})
}

// pass queues every execution under way and every live Job, reading the executions in
// one query; the workers then plan each. At rest (nothing changed) nothing is written.
func (t *execTerm) pass(ctx context.Context) error {
	start := time.Now()
	active, err := t.x.db.ActiveExecutions(ctx)
	if err != nil {
		return fmt.Errorf("executions pass: %w", err)
	}
	t.refresh(active)
	under := make(map[string]bool, len(active))
	running := 0
	for _, e := range active {
		under[e.ID] = true
		if e.Status == job.ExecRunning {
			running++
		}
		t.queue.Add(e.ID)
	}
	t.x.cfg.Metrics.running.Set(float64(running))
	jobs, err := t.jobs.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("executions pass: list jobs: %w", err)
	}
	var others []*batchv1.Job
	for _, j := range jobs {
		if under[j.Name] {
			continue
		}
		// A Job without an execution under way: a run not yet recorded, or a finished one
		// (its Job may not be Complete yet when its pod's success decided it).
		others = append(others, j)
		t.queue.Add(j.Name)
	}
	if err := t.queueMissingLogs(ctx, others); err != nil {
		return err
	}
	t.x.log.InfoContext(ctx, "executions_pass", "active", len(active), "jobs", len(jobs), "duration", time.Since(start))
	return nil
}
