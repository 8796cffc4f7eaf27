// Package tracker is the leader's execution tracker, a controller of the Jobs of
// executions keyed by execution id: it creates the Job of each manual start (and
// catch-up or backfill run), deletes the Job of each cancel, and records every status of
// every Job of this installation's data jobs in the database, once, fenced. A reconcile
// plans from the term's view (plan.go: planExecution, pure), then executes the plan's
// steps (execute.go); the term's informers and queue are in term.go, its view of the rows
// in view.go, the batched status writes in writer.go, the kept logs in logs.go and what
// it keeps beside its caches in kept.go. It runs on the shared loop of package controller.
package tracker

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/leader"
)

// Store is what the execution tracker reads from and writes to the database.
type Store interface {
	ActiveExecutions(ctx context.Context) ([]job.TrackedExecution, error)
	LoadExecution(ctx context.Context, id string) (job.TrackedExecution, bool, error)
	MarkExecutionJobCreated(ctx context.Context, fence job.Fence, id string) (bool, error)
	RecordExecutions(ctx context.Context, fence job.Fence, us []job.ExecutionUpdate) ([]bool, error)
	StoreExecutionLog(ctx context.Context, fence job.Fence, id string, l job.StoredLog) (bool, error)
	FinalWithoutLog(ctx context.Context, ids []string) ([]string, error)
	Listen(ctx context.Context, channel string, ready func(), notify func(payload string)) error
}

// The defaults of Config, which the flags of `datajobs serve` use too.
const (
	// DefaultWorkers bounds the reconciles in flight; a worker mostly waits on I/O: a
	// start holds it for the Job's create and two database round trips, a status for its
	// batched write (writer.go). At 100 starts a second on a loaded machine (bench/triggers,
	// load 25-28) 64 workers were all busy (the creates p50 0.25-0.6 s, the statuses'
	// statements beside them) and the queue's mean wait was 1.6-10 s, the largest part of
	// a run's way to its Job; with 256 it was 2.6 ms and the creates no slower. More
	// workers add no request of their own: at a given rate the creates in flight are the
	// rate times their duration.
	DefaultWorkers        = 256
	DefaultLogWorkers     = 4
	DefaultResyncInterval = 5 * time.Minute
	DefaultImagePullGrace = 5 * time.Minute
	DefaultStartTimeout   = 5 * time.Minute
	DefaultLogBytes       = 256 << 10
)

// Config configures the execution tracker.
type Config struct {
	// Namespace holds the CronJobs, Jobs and Pods (default "datajobs").
	Namespace string
	// Settings are its loop's: Workers handle that many executions in parallel (default
	// DefaultWorkers, 256), their status writes batched, up to one per worker in a
	// statement; Interval is the period of the pass over every execution under way
	// (default DefaultResyncInterval, 5m); Now is the clock of every time the tracker
	// writes or decides by (end times, the image pull grace, the start timeout; durations
	// it only measures for metrics and logs use the monotonic clock); Logger receives its
	// logs.
	controller.Settings
	// LogWorkers read and keep the logs of finished executions, after their final status
	// is written (default 4).
	LogWorkers int
	// ImagePullGrace is how long a pod may fail to pull its image before the execution is
	// a platform error (default 5m).
	ImagePullGrace time.Duration
	// StartTimeout is how long a manual start waits for the job's CronJob to exist before
	// it is a platform error (default 5m).
	StartTimeout time.Duration
	// LogBytes is how much of the end of a finished execution's log is kept (default 256 KiB).
	LogBytes int64
	// MaxKept bounds each of what the tracker keeps beside the informers' caches: the last
	// states of deleted Jobs, of deleted pods, and the pods whose log is to be kept
	// (default 10,000 executions each; kept.go says what happens past it).
	MaxKept int
	// CronJobs, when not nil, is the cache of the namespace's CronJobs that the shard's
	// synchronizer keeps (synchronizer.Synchronizer.CronJobs; nil while it has none): the
	// starts tell by it whether a CronJob read before is current, and the term watches no
	// CronJobs of its own (the same CronJobs twice in memory, and a second list of them
	// at each term's start, beside the synchronizer's). Nil: the term watches them itself.
	CronJobs func() batchlisters.CronJobNamespaceLister
	// OnFinal, when not nil, is called after each final status the tracker writes (a run
	// ended: the backfills service may start the next; maintenance.Backfills.Kick).
	OnFinal func()
	// Metrics records telemetry (default: registered nowhere).
	Metrics *Metrics
}

func (c Config) withDefaults() Config {
	c.Namespace = cmp.Or(c.Namespace, "datajobs")
	c.Settings = c.WithDefaults(DefaultWorkers, DefaultResyncInterval)
	c.LogWorkers = cmp.Or(c.LogWorkers, DefaultLogWorkers)
	c.ImagePullGrace = cmp.Or(c.ImagePullGrace, DefaultImagePullGrace)
	c.StartTimeout = cmp.Or(c.StartTimeout, DefaultStartTimeout)
	c.LogBytes = cmp.Or(c.LogBytes, DefaultLogBytes)
	c.MaxKept = cmp.Or(c.MaxKept, DefaultMaxKept)
	if c.Metrics == nil {
		c.Metrics = NewMetrics(nil)
	}
	if c.OnFinal == nil {
		c.OnFinal = func() {}
	}
	return c
}

// Tracker is the leader's execution tracker: it creates the Kubernetes Job of each
// manual start, deletes the Job of each cancel, and records every status transition of
// every Job of this installation's data jobs (manual or scheduled) in the database, once,
// fenced by the lease epoch and the job's UID. Like the CronJob side it plans, then acts:
// planExecution (plan.go) decides from what the term knows, execute (execute.go) writes.
// Run it only on the leader, beside the synchronizer.
type Tracker struct {
	cfg    Config
	db     Store
	client kubernetes.Interface
	jobs   *kube.JobApplier
	logs   *kube.LogReader
	log    *slog.Logger
	// templates are the CronJobs read to start runs from (cronjobs.go).
	templates *templates
	// term is the term under way, nil between terms (JobExists).
	term atomic.Pointer[execTerm]
}

// New builds the execution tracker; its Job writes are fenced by the leader's
// lease (leader.Check).
func New(cfg Config, db Store, client kubernetes.Interface) *Tracker {
	cfg = cfg.withDefaults()
	return &Tracker{
		cfg: cfg, db: db, client: client, log: cfg.Logger,
		jobs:      kube.NewWriter(client, cfg.Namespace).Fenced(leader.Check).Jobs(),
		logs:      kube.NewLogReader(client, cfg.Namespace, kube.LogConfig{MaxBytes: cfg.LogBytes}),
		templates: newTemplates(),
	}
}

// execTerm is one leadership term of the tracker.
type execTerm struct {
	x     *Tracker
	fence job.Fence
	jobs  batchlisters.JobNamespaceLister
	pods  cache.Indexer
	// cronJobs holds of each CronJob what tells whether a start may use it as read before
	// (cronjobs.go: cronJobMeta); nil when the synchronizer's cache is read instead
	// (Config.CronJobs).
	cronJobs cache.Indexer
	queue    *controller.Queue

	mu   sync.Mutex
	seen map[string]time.Time // when an event about an execution was first seen since its last write
	// deleted holds the last state of Jobs deleted since their execution was last looked
	// at: a Job removed right after it finished (history limit, TTL) still tells its
	// outcome; deletedPods that of their pods, kept until the execution is planned with its
	// Job gone. Both are bounded (kept.go).
	deleted     *kept[*batchv1.Job]
	deletedPods *kept[[]*corev1.Pod]
	// rows is the view of execution rows as this term last read or wrote them: only the
	// leader writes a status, so an event about a known execution needs no read. The API's
	// requests (a start, a cancel) arrive by NOTIFY, which marks the id stale: its row is
	// read again. An entry goes when its Job is gone or a write of it is refused
	// (view.go).
	rows  map[string]job.TrackedExecution
	stale map[string]bool

	// writes batches the workers' status writes (writer.go).
	writes *controller.Batcher[writeRequest]
	// logQueue holds the finished executions whose log is to be kept, the pod of each in
	// logPods: read and written after the final status, so that a slow log read delays
	// no status (logs.go).
	logQueue *controller.Queue
	logPods  *kept[*attempts]
}

// Run tracks executions until ctx ends, as the leader of term epoch. It first plans every
// execution under way against the live Jobs (what happened while no leader watched),
// then follows Job and Pod events, the API's requests (NOTIFY) and a periodic pass. On
// return every goroutine it started has stopped.
func (x *Tracker) Run(ctx context.Context, epoch int64) error {
	t, stop, err := x.startTerm(ctx, epoch)
	if err != nil {
		return err
	}
	defer stop()
	x.term.Store(t)
	defer x.term.Store(nil)
	x.log.InfoContext(ctx, "executions_term_started", "epoch", epoch, "namespace", x.cfg.Namespace)

	var wg sync.WaitGroup
	defer wg.Wait()
	defer t.queue.ShutDown()
	defer t.logQueue.ShutDown()
	defer t.writes.Stop() // run returns once what was handed over is written
	wg.Go(func() { t.writes.Run(ctx) })
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
		t.queue.AddRateLimited(resyncKey)
	}
	wg.Go(func() { controller.Run(ctx, t.queue, x.cfg.Workers, t.reconcile) })
	wg.Go(func() { controller.Run(ctx, t.logQueue, x.cfg.LogWorkers, t.keepLog) })
	wg.Go(func() {
		controller.Every(ctx, x.cfg.Interval, func() bool { t.queue.Add(resyncKey); return true })
	})
	<-ctx.Done()
	return nil
}

// errNoTerm answers JobExists between terms, when the tracker's cache cannot tell.
var errNoTerm = errors.New("the execution tracker's cache of Jobs is not running")

// JobExists says whether a Job of name is in the tracker's cache of this installation's
// Jobs (maintenance.JobCache: a scheduled run the CronJob controller started is no
// missed run, recorded or not).
func (x *Tracker) JobExists(name string) (bool, error) {
	t := x.term.Load()
	if t == nil {
		return false, errNoTerm
	}
	j, err := t.live(name)
	return j != nil, err
}

// resyncKey is a queue item that asks for a full pass; it cannot be an execution id.
const resyncKey = "#resync"

// reconcile handles one queue item: an execution id, or a full pass. It plans from the
// term's view of the row, the cached Job and pods, and carries the plan out.
func (t *execTerm) reconcile(ctx context.Context, id string) (controller.Result, error) {
	if id == resyncKey {
		return controller.Result{}, t.pass(ctx)
	}
	row, err := t.row(ctx, id)
	if err != nil {
		return controller.Result{}, err
	}
	live, err := t.live(id)
	if err != nil {
		return controller.Result{}, err
	}
	v := execView{Row: row, Live: live, Last: t.takeDeleted(id), Pods: t.podsNamed(id), Gone: t.deletedPodsOf(id)}
	p, err := t.plan(ctx, v)
	var res controller.Result
	if err == nil {
		res, err = t.execute(ctx, p)
	}
	switch {
	case p.KeepDeleted || err != nil && p.FromDeleted:
		t.keepDeleted(id, v.Last) // for the next look, or the retry
	case err == nil && live == nil && !t.underWay(id):
		// Its Job is gone and its status final (or it has no row): no plan needs its
		// deleted pods any more. One still under way (a Job not in the cache yet, a write
		// refused) keeps them for the next look.
		t.dropDeletedPods(id)
	}
	return res, err
}

// plan plans an execution from the term's view v, and once more with the apiserver's
// answer when the plan asks whether a Job missing from the cache is gone.
func (t *execTerm) plan(ctx context.Context, v execView) (execPlan, error) {
	l := execLimits{Now: t.x.cfg.Now(), PullGrace: t.x.cfg.ImagePullGrace, StartTimeout: t.x.cfg.StartTimeout}
	p := planExecution(v, l)
	if !slices.Equal(p.Steps, []execAction{execConfirmGone}) {
		return p, nil
	}
	gone, err := t.x.jobs.Gone(ctx, p.ID)
	if err != nil {
		return p, err
	}
	v.JobGone = goneNot
	if gone {
		v.JobGone = goneConfirmed
	}
	return planExecution(v, l), nil
}
