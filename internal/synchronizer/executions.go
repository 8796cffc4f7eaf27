package synchronizer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/leader"
	"github.com/datajobs/datajobs/internal/store"
)

// ExecutionStore is what the execution tracker reads from and writes to the database.
type ExecutionStore interface {
	ActiveExecutions(ctx context.Context) ([]job.TrackedExecution, error)
	LoadExecution(ctx context.Context, id string) (job.TrackedExecution, bool, error)
	MarkExecutionJobCreated(ctx context.Context, fence job.Fence, id string) (bool, error)
	RecordExecutions(ctx context.Context, fence job.Fence, us []job.ExecutionUpdate) ([]bool, error)
	StoreExecutionLog(ctx context.Context, fence job.Fence, id string, l job.StoredLog) (bool, error)
	FinalWithoutLog(ctx context.Context, ids []string) ([]string, error)
	DeleteExpiredExecutions(ctx context.Context, fence job.Fence, r job.Retention) (int, error)
	Listen(ctx context.Context, channel string, ready func(), notify func(payload string)) error
}

// ExecutionConfig configures the execution tracker.
type ExecutionConfig struct {
	// Namespace holds the CronJobs, Jobs and Pods (default "datajobs").
	Namespace string
	// Workers handle that many executions in parallel (default 16); their status writes
	// are batched, up to one per worker in a statement.
	Workers int
	// LogWorkers read and keep the logs of finished executions, after their final status
	// is written (default 4).
	LogWorkers int
	// ResyncInterval is the period of the pass over every execution under way (default 5m).
	ResyncInterval time.Duration
	// ImagePullGrace is how long a pod may fail to pull its image before the execution is
	// a platform error (default 5m).
	ImagePullGrace time.Duration
	// StartTimeout is how long a manual start waits for the job's CronJob to exist before
	// it is a platform error (default 5m).
	StartTimeout time.Duration
	// LogBytes is how much of the end of a finished execution's log is kept (default 256 KiB).
	LogBytes int64
	// Retention bounds the finished executions kept (defaults: 100 per job, 14 days,
	// deleted 500 at a time); RetentionInterval is the period of the cleanup (default 10m).
	Retention         job.Retention
	RetentionInterval time.Duration
	// Logger receives the tracker's logs (default slog.Default()).
	Logger *slog.Logger
	// Metrics records telemetry (default: registered nowhere).
	Metrics *ExecutionMetrics
	// Now is the clock (default time.Now).
	Now func() time.Time
}

func (c ExecutionConfig) withDefaults() ExecutionConfig {
	c.Namespace = cmp.Or(c.Namespace, "datajobs")
	c.Workers = cmp.Or(c.Workers, 16)
	c.LogWorkers = cmp.Or(c.LogWorkers, 4)
	c.ResyncInterval = cmp.Or(c.ResyncInterval, 5*time.Minute)
	c.ImagePullGrace = cmp.Or(c.ImagePullGrace, 5*time.Minute)
	c.StartTimeout = cmp.Or(c.StartTimeout, 5*time.Minute)
	c.LogBytes = cmp.Or(c.LogBytes, 256<<10)
	c.Retention.KeptPerJob = cmp.Or(c.Retention.KeptPerJob, 100)
	c.Retention.MaxAge = cmp.Or(c.Retention.MaxAge, 14*24*time.Hour)
	c.Retention.Batch = cmp.Or(c.Retention.Batch, 500)
	c.RetentionInterval = cmp.Or(c.RetentionInterval, 10*time.Minute)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if c.Metrics == nil {
		c.Metrics = NewExecutionMetrics(nil)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Executions is the leader's execution stage: it creates the Kubernetes Job of each manual
// start, deletes the Job of each cancel, and records every status transition of every
// Job of a managed data job (manual or scheduled) in the database, once, fenced by the
// lease epoch and the job's UID. Run it only on the leader, beside the Synchronizer.
type Executions struct {
	cfg    ExecutionConfig
	db     ExecutionStore
	client kubernetes.Interface
	logs   *kube.LogReader
	log    *slog.Logger
}

// NewExecutions builds the execution tracker.
func NewExecutions(cfg ExecutionConfig, db ExecutionStore, client kubernetes.Interface) *Executions {
	cfg = cfg.withDefaults()
	return &Executions{
		cfg: cfg, db: db, client: client, log: cfg.Logger,
		logs: kube.NewLogReader(client, cfg.Namespace, kube.LogConfig{MaxBytes: cfg.LogBytes}),
	}
}

// execTerm is one leadership term of the tracker.
type execTerm struct {
	x     *Executions
	fence job.Fence
	jobs  batchlisters.JobNamespaceLister
	pods  cache.Indexer
	queue workqueue.TypedRateLimitingInterface[string]

	mu   sync.Mutex
	seen map[string]time.Time // when an event about an execution was first seen since its last write
	// deleted holds the last state of Jobs deleted since their execution was last looked
	// at: a Job removed right after it finished (history limit, TTL) still tells its outcome.
	deleted map[string]*batchv1.Job
	// rows is the view of execution rows as this term last read or wrote them: only the
	// leader writes a status, so an event about a known execution needs no read. The API's
	// requests (a start, a cancel) arrive by NOTIFY, which marks the id stale: its row is
	// read again. An entry goes when its Job is gone or a write of it is refused.
	rows  map[string]job.TrackedExecution
	stale map[string]bool

	// writes carries the workers' status writes to the writer, which batches them.
	writes chan writeRequest
	// logQueue holds the finished executions whose log is to be kept, the pod of each in
	// logPods: read and written after the final status, so that a slow log read delays
	// no status.
	logQueue workqueue.TypedRateLimitingInterface[string]
	logPods  map[string]*corev1.Pod
}

// writeRequest is one status write waiting for the writer.
type writeRequest struct {
	u    job.ExecutionUpdate
	done chan writeResult // buffered: the writer never waits for the worker
}

type writeResult struct {
	wrote bool
	err   error
}

const podsByJobIndex = "job-name"

// Run tracks executions until ctx ends, as the leader of term epoch. It first reconciles
// every execution under way against the live Jobs (what happened while no leader
// watched), then follows Job and Pod events, the API's requests (NOTIFY) and a periodic
// pass. On return every goroutine it started has stopped.
func (x *Executions) Run(ctx context.Context, epoch int64) error {
	factory := informers.NewSharedInformerFactoryWithOptions(x.client, 0, informers.WithNamespace(x.cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = kube.ManagedSelector().String() }))
	jobInformer := factory.Batch().V1().Jobs()
	podInformer := factory.Core().V1().Pods()
	if err := podInformer.Informer().AddIndexers(cache.Indexers{podsByJobIndex: func(obj any) ([]string, error) {
		if p, ok := obj.(*corev1.Pod); ok && p.Labels[kube.LabelJobName] != "" {
			return []string{p.Labels[kube.LabelJobName]}, nil
		}
		return nil, nil
	}}); err != nil {
		return fmt.Errorf("index pods: %w", err)
	}
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond, time.Minute),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "datajobs_executions"})
	t := &execTerm{
		x: x, fence: job.Fence{Epoch: epoch}, jobs: jobInformer.Lister().Jobs(x.cfg.Namespace),
		pods: podInformer.Informer().GetIndexer(), queue: queue, seen: map[string]time.Time{}, deleted: map[string]*batchv1.Job{},
		rows: map[string]job.TrackedExecution{}, stale: map[string]bool{},
		writes: make(chan writeRequest), logPods: map[string]*corev1.Pod{},
		logQueue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "datajobs_execution_logs"}),
	}

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
			t.mu.Lock()
			t.deleted[j.Name] = j
			t.mu.Unlock()
			t.enqueue(j.Name)
		}
	}
	onPod := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if p, ok := obj.(*corev1.Pod); ok && p.Labels[kube.LabelJobName] != "" {
			t.enqueue(p.Labels[kube.LabelJobName])
		}
	}
	handlers := []cache.SharedIndexInformer{jobInformer.Informer(), podInformer.Informer()}
	for i, h := range [][2]func(any){{onJob, onJobDeleted}, {onPod, onPod}} {
		if _, err := handlers[i].AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
			// The initial list is covered by the first pass.
			AddFunc: func(obj any, initial bool) {
				if !initial {
					h[0](obj)
				}
			},
			UpdateFunc: func(_, obj any) { h[0](obj) },
			DeleteFunc: h[1],
		}); err != nil {
			queue.ShutDown()
			return fmt.Errorf("watch executions: %w", err)
		}
	}
	informerCtx, cancel := context.WithCancel(ctx)
	factory.Start(informerCtx.Done())
	defer factory.Shutdown()
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), jobInformer.Informer().HasSynced, podInformer.Informer().HasSynced) {
		queue.ShutDown()
		t.logQueue.ShutDown()
		return fmt.Errorf("wait for job and pod caches: %w", context.Cause(ctx))
	}
	x.log.InfoContext(ctx, "executions_term_started", "epoch", epoch, "namespace", x.cfg.Namespace)

	var wg sync.WaitGroup
	defer wg.Wait()
	defer queue.ShutDown()
	defer t.logQueue.ShutDown()
	wg.Go(func() { t.writer(ctx) })
	// Requests that arrive during the first pass wait in the queue.
	listening := make(chan struct{})
	wg.Go(func() { t.listen(ctx, listening) })
	select {
	case <-listening:
	case <-ctx.Done():
		return nil
	}
	if err := t.pass(ctx); err != nil {
		x.log.WarnContext(ctx, "executions_pass_failed", "error", err)
		queue.AddRateLimited(resyncKey)
	}
	for range x.cfg.Workers {
		wg.Go(func() { t.work(ctx) })
	}
	for range x.cfg.LogWorkers {
		wg.Go(func() { t.keepLogs(ctx) })
	}
	wg.Go(func() { t.tick(ctx, x.cfg.ResyncInterval, func() { queue.Add(resyncKey) }) })
	wg.Go(func() { t.tick(ctx, x.cfg.RetentionInterval, func() { t.cleanup(ctx) }) })
	<-ctx.Done()
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

// listen queues every execution id NOTIFYed by the API, reconnecting with backoff; each
// reconnection queues a pass for what it may have missed. It closes listening once it
// listens the first time.
func (t *execTerm) listen(ctx context.Context, listening chan struct{}) {
	listenLoop(ctx, t.x.db, store.ExecutionsChannel, 500*time.Millisecond, t.x.log, func(first bool) {
		if first {
			close(listening)
		} else {
			t.queue.Add(resyncKey)
		}
	}, func(id string) {
		t.mu.Lock()
		t.stale[id] = true
		t.mu.Unlock()
		t.queue.Add(id)
	})
}

func (t *execTerm) tick(ctx context.Context, every time.Duration, fn func()) {
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			fn()
		}
	}
}

func (t *execTerm) work(ctx context.Context) {
	for {
		id, shutdown := t.queue.Get()
		if shutdown {
			return
		}
		var err error
		if id == resyncKey {
			err = t.pass(ctx)
		} else {
			err = t.reconcileID(ctx, id)
		}
		switch {
		case err == nil:
			t.queue.Forget(id)
		case ctx.Err() != nil:
		default:
			t.x.log.WarnContext(ctx, "execution_sync_failed", "execution", id, "error", err)
			t.queue.AddRateLimited(id)
		}
		t.queue.Done(id)
	}
}

// pass reconciles every execution under way and every live Job, reading the executions in
// one query. At rest (nothing changed) it writes nothing.
func (t *execTerm) pass(ctx context.Context) error {
	start := time.Now()
	active, err := t.x.db.ActiveExecutions(ctx)
	if err != nil {
		return fmt.Errorf("executions pass: %w", err)
	}
	done := make(map[string]bool, len(active))
	running := 0
	t.mu.Lock()
	for id, r := range t.rows {
		if !r.Status.Final() {
			delete(t.rows, id) // under way when last seen, not any more: read it when needed
		}
	}
	for _, e := range active {
		t.rows[e.ID] = e
	}
	t.mu.Unlock()
	for i := range active {
		e := &active[i]
		done[e.ID] = true
		if e.Status == job.ExecRunning {
			running++
		}
		if err := t.reconcile(ctx, e.ID, e); err != nil {
			t.x.log.WarnContext(ctx, "execution_sync_failed", "execution", e.ID, "error", err)
			t.queue.AddRateLimited(e.ID)
		}
	}
	t.x.cfg.Metrics.running.Set(float64(running))
	jobs, err := t.jobs.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("executions pass: list jobs: %w", err)
	}
	var others []*batchv1.Job
	for _, j := range jobs {
		if done[j.Name] {
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

// reconcileID reconciles one execution from the term's view of its row, read from the
// database when the view has none or the API changed it since.
func (t *execTerm) reconcileID(ctx context.Context, id string) error {
	t.mu.Lock()
	row, known := t.rows[id]
	known = known && !t.stale[id]
	delete(t.stale, id)
	t.mu.Unlock()
	if known {
		return t.reconcile(ctx, id, &row)
	}
	row, ok, err := t.x.db.LoadExecution(ctx, id)
	if err != nil {
		t.markStale(id)
		return err
	}
	if !ok {
		return t.reconcile(ctx, id, nil)
	}
	t.mu.Lock()
	if !t.stale[id] { // else a NOTIFY came meanwhile and the id is queued again
		t.rows[id] = row
	}
	t.mu.Unlock()
	return t.reconcile(ctx, id, &row)
}

func (t *execTerm) markStale(id string) {
	t.mu.Lock()
	t.stale[id] = true
	t.mu.Unlock()
}

// forget drops an execution from the term's view: its next event reads the row.
func (t *execTerm) forget(id string) {
	t.mu.Lock()
	delete(t.rows, id)
	t.mu.Unlock()
}

// wrote updates the term's view after a status of u was committed.
func (t *execTerm) wrote(row *job.TrackedExecution, u job.ExecutionUpdate) {
	var r job.TrackedExecution
	if row != nil {
		r = *row
	} else {
		r = job.TrackedExecution{ID: u.ID, JobName: u.JobName, JobUID: u.JobUID, Type: u.Type, OpID: u.OpID, StartedBy: u.StartedBy}
	}
	r.Status = u.Status
	if r.StartTime == nil {
		r.StartTime = u.StartTime
	}
	t.mu.Lock()
	if cur, ok := t.rows[u.ID]; ok {
		r.CancelRequested = r.CancelRequested || cur.CancelRequested
	}
	t.rows[u.ID] = r
	t.mu.Unlock()
}

// reconcile brings one execution's row and Job in line: it creates the Job of a manual
// start, deletes the Job of a cancel, and records the status the Job shows (or its loss).
func (t *execTerm) reconcile(ctx context.Context, id string, row *job.TrackedExecution) error {
	live, err := t.jobs.Get(id)
	if apierrors.IsNotFound(err) {
		live = nil
	} else if err != nil {
		return fmt.Errorf("read job %s from cache: %w", id, err)
	}
	t.mu.Lock()
	last := t.deleted[id]
	delete(t.deleted, id)
	t.mu.Unlock()
	if live == nil && last != nil && (row == nil || row.JobUID == "" || last.Labels[kube.LabelJobUID] == row.JobUID) {
		if c, f := jobDone(last); c || f {
			// Deleted after it finished: its last state has the outcome.
			if row != nil && row.Status.Final() {
				return nil
			}
			err := t.observe(ctx, row, last, t.x.cfg.Now())
			if err != nil { // keep it for the retry
				t.mu.Lock()
				t.deleted[id] = last
				t.mu.Unlock()
			}
			return err
		}
	}
	if live != nil && row != nil && row.JobUID != "" && live.Labels[kube.LabelJobUID] != row.JobUID {
		live = nil // a Job of another incarnation of the data job: not this execution's
	}
	now := t.x.cfg.Now()
	switch {
	case row != nil && row.Status.Final():
		if live == nil {
			t.forget(id) // its Job is gone: no more events about it
		}
		if live != nil && live.DeletionTimestamp == nil {
			if c, f := jobDone(live); !c && !f && !t.podSucceeded(live) {
				// Decided while still running (an image that never came): stop it. A Job
				// whose pod succeeded is left to the Job controller to complete.
				return t.deleteJob(ctx, live, metav1.DeletePropagationBackground)
			}
		}
		return nil
	case row != nil && row.CancelRequested:
		if live == nil {
			gone, err := t.confirmGone(ctx, id)
			if err != nil || !gone {
				return err
			}
			return t.record(ctx, row, nil, job.ExecutionUpdate{Status: job.ExecCancelled, Message: "Cancelled on request.", EndTime: &now})
		}
		if c, f := jobDone(live); c || f {
			return t.observe(ctx, row, live, now) // it ended before the cancel reached it
		}
		if live.DeletionTimestamp == nil {
			return t.deleteJob(ctx, live, metav1.DeletePropagationForeground)
		}
		return nil // being deleted: the delete event brings it back
	case live == nil && row == nil:
		return nil
	case live == nil && row.Type == job.ExecManual && row.Status == job.ExecSubmitted && !row.JobCreated:
		return t.create(ctx, row, now)
	case live == nil:
		gone, err := t.confirmGone(ctx, id)
		if err != nil || !gone {
			return err
		}
		return t.record(ctx, row, nil, job.ExecutionUpdate{
			Status: job.ExecPlatformError, EndTime: &now,
			Message: fmt.Sprintf("execution record lost: the Kubernetes Job %s disappeared before its outcome was seen "+
				"(deleted by hand, or removed after it finished while no datajobs leader was watching).", id),
		})
	default:
		return t.observe(ctx, row, live, now)
	}
}

// observe records the status a live Job and its pods show, when it differs from the row.
func (t *execTerm) observe(ctx context.Context, row *job.TrackedExecution, live *batchv1.Job, now time.Time) error {
	o := kube.ObserveExecution(live, t.podsOf(live), now, t.x.cfg.ImagePullGrace)
	if o.RecheckAfter > 0 {
		t.queue.AddAfter(live.Name, o.RecheckAfter)
	}
	if row != nil && row.Status == o.Status {
		t.takeSeen(live.Name)
		return nil
	}
	u := job.ExecutionUpdate{Status: o.Status, Message: o.Message, StartTime: o.Start, EndTime: o.End}
	if err := t.record(ctx, row, live, u); err != nil {
		return err
	}
	if o.Status.Final() && o.Pod != nil {
		// Its log is kept next; meanwhile the API reads it from the pod.
		t.queueLog(live.Name, o.Pod)
	}
	if o.Abandon && live.DeletionTimestamp == nil {
		return t.deleteJob(ctx, live, metav1.DeletePropagationBackground)
	}
	return nil
}

// record writes one status of an execution, fenced; live (may be nil) is its Job, whose
// labels and annotations describe a run not recorded yet.
func (t *execTerm) record(ctx context.Context, row *job.TrackedExecution, live *batchv1.Job, u job.ExecutionUpdate) error {
	u.ID = idOf(row, live)
	seen := t.takeSeen(u.ID)
	if row != nil {
		u.JobName, u.JobUID, u.Type, u.OpID, u.StartedBy = row.JobName, row.JobUID, row.Type, row.OpID, row.StartedBy
	} else {
		u.JobName, u.JobUID = live.Labels[kube.LabelJob], live.Labels[kube.LabelJobUID]
		u.Type = cmp.Or(live.Annotations[kube.AnnotationExecutionType], job.ExecScheduled)
		u.OpID = cmp.Or(live.Annotations[kube.AnnotationOpID], live.Name)
		u.StartedBy = cmp.Or(live.Annotations[kube.AnnotationStartedBy], "scheduled/runtime")
		if u.StartTime == nil {
			u.StartTime = &live.CreationTimestamp.Time
		}
	}
	if u.JobName == "" || u.JobUID == "" {
		return nil // not a Job of a data job datajobs rendered
	}
	wrote, err := t.write(ctx, u)
	if err != nil {
		t.forget(u.ID)
		t.enqueueSeen(u.ID, seen)
		return err
	}
	if !wrote {
		t.forget(u.ID) // the row is not what the view says (or the lease is lost): read it next time
	}
	if wrote {
		t.wrote(row, u)
		t.x.cfg.Metrics.recorded(u, row, seen)
		t.x.log.InfoContext(ctx, "execution_recorded", "execution", u.ID, "job", u.JobName, "status", string(u.Status))
	}
	return nil
}

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

func idOf(row *job.TrackedExecution, live *batchv1.Job) string {
	if row != nil {
		return row.ID
	}
	return live.Name
}

// create creates the Job of a manual start from the job's CronJob. While the CronJob is
// missing (its deployment not applied yet) it retries, until StartTimeout makes the
// execution a platform error.
func (t *execTerm) create(ctx context.Context, row *job.TrackedExecution, now time.Time) error {
	cj, err := t.x.client.BatchV1().CronJobs(t.x.cfg.Namespace).Get(ctx, row.JobName, metav1.GetOptions{})
	if err == nil && (cj.Labels[kube.LabelJobUID] != row.JobUID || cj.DeletionTimestamp != nil) {
		err = apierrors.NewNotFound(batchv1.Resource("cronjobs"), row.JobName)
	}
	if apierrors.IsNotFound(err) {
		if row.StartTime != nil && now.Sub(*row.StartTime) >= t.x.cfg.StartTimeout {
			return t.record(ctx, row, nil, job.ExecutionUpdate{
				Status: job.ExecPlatformError, EndTime: &now,
				Message: fmt.Sprintf("The execution could not start: the job's CronJob %s did not exist within %s of the request.", row.JobName, t.x.cfg.StartTimeout),
			})
		}
		return fmt.Errorf("start execution %s: cronjob %s not there yet", row.ID, row.JobName)
	}
	if err != nil {
		return fmt.Errorf("start execution %s: read cronjob: %w", row.ID, err)
	}
	j := kube.ExecutionJob(cj, kube.ManualExecution{ID: row.ID, OpID: row.OpID, StartedBy: row.StartedBy, Args: row.Args})
	if err := leader.Check(ctx); err != nil { // a deposed leader starts nothing
		return fmt.Errorf("start execution %s: %w", row.ID, err)
	}
	_, err = t.x.client.BatchV1().Jobs(t.x.cfg.Namespace).Create(ctx, j, metav1.CreateOptions{FieldManager: "datajobs"})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("start execution %s: create job: %w", row.ID, err)
	}
	t.x.cfg.Metrics.started.Inc()
	t.x.log.InfoContext(ctx, "execution_job_created", "execution", row.ID, "job", row.JobName)
	// Recorded, so that a Job deleted before its pod ran is a lost execution, not started
	// again by this leader or the next.
	if _, err := t.x.db.MarkExecutionJobCreated(ctx, t.fence, row.ID); err != nil {
		return fmt.Errorf("start execution %s: %w", row.ID, err)
	}
	t.mu.Lock()
	if r, ok := t.rows[row.ID]; ok {
		r.JobCreated = true
		t.rows[row.ID] = r
	}
	t.mu.Unlock()
	return nil
}

// deleteJob deletes an execution's Job, only that object (UID precondition).
func (t *execTerm) deleteJob(ctx context.Context, j *batchv1.Job, policy metav1.DeletionPropagation) error {
	if err := leader.Check(ctx); err != nil { // a deposed leader deletes nothing
		return fmt.Errorf("delete job %s: %w", j.Name, err)
	}
	err := t.x.client.BatchV1().Jobs(t.x.cfg.Namespace).Delete(ctx, j.Name, metav1.DeleteOptions{
		PropagationPolicy: &policy, Preconditions: &metav1.Preconditions{UID: &j.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete job %s: %w", j.Name, err)
	}
	return nil
}

// confirmGone asks the apiserver whether a Job the cache does not have is really gone: a
// Job created a moment ago may not be in the cache yet.
func (t *execTerm) confirmGone(ctx context.Context, id string) (bool, error) {
	_, err := t.x.client.BatchV1().Jobs(t.x.cfg.Namespace).Get(ctx, id, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("read job %s: %w", id, err)
	}
	t.queue.AddAfter(id, time.Second) // the cache will catch up; look again
	return false, nil
}

func jobDone(j *batchv1.Job) (complete, failed bool) {
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete, batchv1.JobSuccessCriteriaMet:
			complete = true
		case batchv1.JobFailed, batchv1.JobFailureTarget:
			failed = true
		}
	}
	return complete, failed
}

// cleanup deletes the finished executions beyond the retention.
func (t *execTerm) cleanup(ctx context.Context) {
	n, err := t.x.db.DeleteExpiredExecutions(ctx, t.fence, t.x.cfg.Retention)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			t.x.log.WarnContext(ctx, "executions_cleanup_failed", "error", err)
		}
		return
	}
	if n > 0 {
		t.x.log.InfoContext(ctx, "executions_cleaned", "deleted", n)
	}
}

// write hands a status write to the writer and waits for its outcome.
func (t *execTerm) write(ctx context.Context, u job.ExecutionUpdate) (bool, error) {
	req := writeRequest{u: u, done: make(chan writeResult, 1)}
	select {
	case t.writes <- req:
	case <-ctx.Done():
		return false, context.Cause(ctx)
	}
	select {
	case r := <-req.done:
		return r.wrote, r.err
	case <-ctx.Done():
		return false, context.Cause(ctx)
	}
}

// writer writes the workers' statuses, each statement taking every write waiting (at
// most one per execution: a second one waits for the next statement). One status is one
// row written whatever the batch; under a burst the statements are fewer than the rows.
func (t *execTerm) writer(ctx context.Context) {
	var next []writeRequest
	for {
		batch := next
		next = nil
		if len(batch) == 0 {
			select {
			case <-ctx.Done():
				return
			case r := <-t.writes:
				batch = append(batch, r)
			}
		}
		ids := make(map[string]bool, len(batch))
		for _, r := range batch {
			ids[r.u.ID] = true
		}
	drain:
		for len(batch) < 4*t.x.cfg.Workers {
			select {
			case r := <-t.writes:
				if ids[r.u.ID] {
					next = append(next, r)
					continue
				}
				ids[r.u.ID] = true
				batch = append(batch, r)
			default:
				break drain
			}
		}
		us := make([]job.ExecutionUpdate, len(batch))
		for i, r := range batch {
			us[i] = r.u
		}
		wrote, err := t.x.db.RecordExecutions(ctx, t.fence, us)
		for i, r := range batch {
			if err != nil {
				r.done <- writeResult{err: err}
			} else {
				r.done <- writeResult{wrote: wrote[i]}
			}
		}
	}
}

// queueLog asks for the log of the finished execution id, printed by pod, to be kept.
func (t *execTerm) queueLog(id string, pod *corev1.Pod) {
	t.mu.Lock()
	t.logPods[id] = pod
	t.mu.Unlock()
	t.logQueue.Add(id)
}

// podSucceeded reports whether the latest pod of Job j succeeded (cache).
func (t *execTerm) podSucceeded(j *batchv1.Job) bool {
	p := kube.LatestPod(t.podsOf(j))
	return p != nil && p.Status.Phase == corev1.PodSucceeded
}

// podsOf returns the cached pods of Job j (of this very Job: a pod of an earlier Job of
// the same name is not its).
func (t *execTerm) podsOf(j *batchv1.Job) []*corev1.Pod {
	objs, err := t.pods.ByIndex(podsByJobIndex, j.Name)
	if err != nil {
		return nil // the index exists from the start of the term
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok && metav1.IsControlledBy(p, j) {
			pods = append(pods, p)
		}
	}
	return pods
}

// queueMissingLogs queues the logs of the final executions among the Jobs that have none
// kept (the previous leader stopped in between).
func (t *execTerm) queueMissingLogs(ctx context.Context, jobs []*batchv1.Job) error {
	if len(jobs) == 0 {
		return nil
	}
	byID := make(map[string]*batchv1.Job, len(jobs))
	for _, j := range jobs {
		byID[j.Name] = j
	}
	missing, err := t.x.db.FinalWithoutLog(ctx, slices.Collect(maps.Keys(byID)))
	if err != nil {
		return fmt.Errorf("executions pass: %w", err)
	}
	for _, id := range missing {
		if p := kube.LatestPod(t.podsOf(byID[id])); p != nil {
			t.queueLog(id, p)
		}
	}
	return nil
}

// keepLogs reads and keeps the logs of finished executions until the log queue shuts down.
func (t *execTerm) keepLogs(ctx context.Context) {
	for {
		id, shutdown := t.logQueue.Get()
		if shutdown {
			return
		}
		t.mu.Lock()
		pod := t.logPods[id]
		t.mu.Unlock()
		err := t.keepLog(ctx, id, pod)
		switch {
		case err == nil:
			t.logQueue.Forget(id)
			t.mu.Lock()
			if t.logPods[id] == pod {
				delete(t.logPods, id)
			}
			t.mu.Unlock()
		case ctx.Err() != nil:
		default:
			t.x.log.WarnContext(ctx, "execution_log_store_failed", "execution", id, "error", err)
			t.logQueue.AddRateLimited(id)
		}
		t.logQueue.Done(id)
	}
}

func (t *execTerm) keepLog(ctx context.Context, id string, pod *corev1.Pod) error {
	if pod == nil {
		return nil
	}
	text, truncated, err := t.x.logs.PodLog(ctx, pod, 0, t.x.cfg.LogBytes)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		// Keep an empty one rather than ask a cluster that could not answer, and say so.
		t.x.log.WarnContext(ctx, "execution_log_unreadable", "execution", id, "error", err)
		t.x.cfg.Metrics.logsUnreadable.Inc()
	}
	if _, err := t.x.db.StoreExecutionLog(ctx, t.fence, id, job.StoredLog{Logs: text, Truncated: truncated}); err != nil {
		return err
	}
	return nil
}
