// Package synchronizer is the leader's CronJob controller and its stages. It keeps this
// installation's Kubernetes CronJobs of a namespace an exact projection of the desired
// deployments in PostgreSQL. It is level-triggered and keyed by job name: whatever woke it
// (a NOTIFY from the API, an informer event on a CronJob of the namespace, the periodic
// resync), a reconcile loads fresh state, plans the one thing that makes the cluster
// match (plan.go), decides what the term's guards let it do of that (decide.go: the prune
// guard, prune.go; the restore guard, restore.go) and does it (execute.go), recording what
// Kubernetes confirmed (record.go, intent.go). Its stages beside: the full pass (pass.go,
// prefetch.go), the image builds (build.go), the teams' OAuth Secrets (teamsecret.go) and
// the profiles' placements the admission policy reads (placements.go).
// Its queues run on the shared loop of package controller; the Jobs of executions are
// package tracker's, the leader's periodic services package maintenance's.
package synchronizer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/leader"
	"github.com/datajobs/datajobs/internal/secrets"
	"github.com/datajobs/datajobs/internal/store"
)

// Store is what the synchronizer reads from and writes to the database.
type Store interface {
	LoadSyncState(ctx context.Context, name string) (job.SyncState, error)
	LoadSyncChanges(ctx context.Context, since store.SyncCursor) (store.SyncChanges, error)
	PruneSyncChanges(ctx context.Context, fence job.Fence, before store.SyncCursor) (int64, error)
	RecordAppliedAll(ctx context.Context, fence job.Fence, as []job.ActualDeployment) ([]bool, error)
	RecordIntents(ctx context.Context, fence job.Fence, is []job.Intent) ([]bool, error)
	RecordUnappliedStatus(ctx context.Context, fence job.Fence, name, uid string, gen int64, status job.SyncStatus, message string) (bool, error)
	DeleteActual(ctx context.Context, fence job.Fence, name, uid string) (bool, error)
	CountDeploymentsByStatus(ctx context.Context) (map[job.SyncStatus]int, error)
	InstallationID(ctx context.Context) (string, error)
	IssuedRevision(ctx context.Context) (int64, error)
	AdvanceRevision(ctx context.Context, fence job.Fence, rev int64) (bool, error)
	LeaseConfigFingerprint(ctx context.Context, name string) (string, error)
	SetLeaseConfigFingerprint(ctx context.Context, name string, epoch int64, fingerprint string) (bool, error)
	Listen(ctx context.Context, channel string, ready func(), notify func(payload string)) error
	DeliveredTeamOAuth(ctx context.Context) ([]secrets.TeamOAuth, error)
	ListProfiles(ctx context.Context) ([]job.ProfileRecord, error)
	JobsElsewhere(ctx context.Context, names []string) (map[string]bool, error)
}

// Applier is what the synchronizer writes to Kubernetes (implemented by *kube.Applier,
// whose doc comments give the contract: creates that take over nothing, by apply without
// live or plainly, and preconditions on live's UID and resourceVersion otherwise).
type Applier interface {
	Apply(ctx context.Context, live, cj *batchv1.CronJob) (*batchv1.CronJob, error)
	CreatePlainly(ctx context.Context, cj *batchv1.CronJob) (*batchv1.CronJob, error)
	Replace(ctx context.Context, live, cj *batchv1.CronJob) (*batchv1.CronJob, error)
	Delete(ctx context.Context, live *batchv1.CronJob) error
	Gone(ctx context.Context, name, jobUID string) (bool, error)
}

// Synchronizer reconciles desired deployments into CronJobs. Run it only on the leader.
type Synchronizer struct {
	cfg    Config
	db     Store
	client kubernetes.Interface
	// writer makes every write to Kubernetes, fenced by the leader's lease (leader.Check):
	// the CronJobs through applier (unless New was given another), the team Secrets
	// through secrets.
	writer  *kube.Writer
	applier Applier
	secrets *kube.SecretApplier
	log     *slog.Logger
	metrics *Metrics

	mu       sync.Mutex
	verified map[string]*verified
	lastPlan map[string]PlannedJob
	// prune is the mass-prune guard's verdict of the latest full pass.
	prune pruneVerdict
	// configRefused says why the latest term refused its configuration ("": it did not).
	configRefused string
	// restore is the restore guard's refusal (restore.go), kept until the process ends.
	restore *RestoreRefusal
	// cronJobs is the running term's synced cache of CronJobs (CronJobs), nil between terms.
	cronJobs atomic.Pointer[batchlisters.CronJobNamespaceLister]
}

// CronJobs is the running term's cache of the target's CronJobs once it has synced, nil
// between terms: the execution tracker of the same shard reads it (tracker.Config.CronJobs)
// rather than watching the same CronJobs again, one cache of them a shard.
func (s *Synchronizer) CronJobs() batchlisters.CronJobNamespaceLister {
	if l := s.cronJobs.Load(); l != nil {
		return *l
	}
	return nil
}

// New builds a synchronizer over the database and the cluster's client; its writes to
// Kubernetes are fenced by the leader's lease (leader.Check), and applier, when not nil,
// writes the CronJobs instead of its own fenced kube.Applier (tests inject failures so).
func New(cfg Config, db Store, client kubernetes.Interface, applier Applier) *Synchronizer {
	cfg = cfg.withDefaults()
	writer := kube.NewWriter(client, cfg.Render.Namespace).Fenced(leader.Check)
	if applier == nil {
		applier = writer.CronJobs()
	}
	return &Synchronizer{
		cfg: cfg, db: db, client: client, writer: writer, applier: applier, secrets: writer.Secrets(),
		log: cfg.Logger, metrics: cfg.Metrics,
	}
}

// term is one leadership term of the synchronizer: its fence, rendering configuration
// (with the installation id), informer and queue.
type term struct {
	s      *Synchronizer
	fence  job.Fence
	render kube.RenderConfig
	lister batchlisters.CronJobNamespaceLister
	queue  *controller.Queue
	builds *buildStage  // nil without a builder
	teams  *teamSecrets // nil without TeamOAuthKeys
	// placements is the profiles' placements ConfigMap (placements.go); nil if unwatched.
	placements *placements
	// records writes the rows of applied CronJobs in batches; nil in a single pass
	// (RunOnce), which writes each at once.
	records *recorder

	// echoes holds, per job name, this term's write in flight or just made: the
	// informer's event of the very object written is the echo of our own write and queues
	// nothing, as the write's own outcome finishes the name (a refused record plans it
	// again). Any other event of the name is queued.
	echoMu sync.Mutex
	echoes map[string]echo

	// prefetched holds, per job name a full pass queued for a create, that pass's plan
	// (prefetch.go); notified holds the notification count at each name's latest NOTIFY.
	prefetchMu sync.Mutex
	prefetched map[string]Plan
	notified   map[string]int64
	notifies   int64
	// notices are the notified names not yet known to be the shard's (loop.go).
	notices *notices

	// passStates are the states of the latest pass, which the next one brings up to date
	// (passstate.go); only the pass uses them, and only one pass runs at a time.
	passStates passStates

	// accounts are the team ServiceAccounts this term made sure of (identity.go).
	accounts sync.Map
}

// Run synchronizes until ctx ends, as the leader of term epoch: it starts the informer,
// the NOTIFY listener, the periodic resync (with a first pass at once) and the workers,
// and on return every one of them has stopped. Queued work is dropped: the next leader
// starts with a full pass. It returns ErrAPIServerUnreachable when the apiserver has not
// answered for StepDownAfter, and ErrConfigChanged when the rendering configuration was
// not accepted: the caller should then end its term, so that another replica can try.
func (s *Synchronizer) Run(ctx context.Context, epoch int64) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if s.cfg.StepDownAfter > 0 {
		wg.Go(func() { s.watchAPIServer(ctx, cancel) })
	}
	t, stop, err := s.startTerm(ctx, epoch)
	if cause := context.Cause(ctx); errors.Is(cause, ErrAPIServerUnreachable) {
		err = cause
	}
	if err != nil {
		return err
	}
	defer stop()

	defer t.queue.ShutDown()
	defer t.builds.stop()
	t.builds.start(ctx, &wg)
	t.records = newRecorder(s.db, t.fence, s.cfg.RecordBatch)
	wg.Go(func() { t.records.run(ctx) })
	var workers sync.WaitGroup
	workers.Go(func() { controller.Run(ctx, t.queue, s.cfg.Workers, t.reconcile) })
	defer func() {
		// The recorder stops after the last worker, which may have handed it a row.
		t.queue.ShutDown()
		workers.Wait()
		t.records.stop()
	}()
	wg.Go(func() { t.listen(ctx) })
	wg.Go(func() { t.sortNotices(ctx) })
	if t.teams != nil {
		wg.Go(func() { t.listenTeamOAuth(ctx) })
	}
	wg.Go(func() { t.listenProfiles(ctx) })
	t.queue.Add(resyncKey) // a first pass at once, then every Interval
	wg.Go(func() {
		controller.Every(ctx, s.cfg.Interval, func() bool { t.queue.Add(resyncKey); return true })
	})
	<-ctx.Done()
	if cause := context.Cause(ctx); errors.Is(cause, ErrAPIServerUnreachable) {
		return cause
	}
	return nil
}

// ErrAPIServerUnreachable ends a term whose leader has not reached the apiserver for
// StepDownAfter: another replica, perhaps with a better network path, may do better.
var ErrAPIServerUnreachable = errors.New("the Kubernetes API server has not answered for longer than the lease; stepping down")

// watchAPIServer asks the apiserver's /readyz every StepDownAfter/4 and cancels the term
// with ErrAPIServerUnreachable when no answer came for StepDownAfter.
func (s *Synchronizer) watchAPIServer(ctx context.Context, cancel context.CancelCauseFunc) {
	period := s.cfg.StepDownAfter / 4
	last := time.Now()
	controller.Every(ctx, period, func() bool {
		pingCtx, done := context.WithTimeout(ctx, period)
		_, err := s.client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(pingCtx)
		done()
		if err == nil {
			last = time.Now()
			return true
		}
		if since := time.Since(last); since > s.cfg.StepDownAfter {
			s.log.ErrorContext(ctx, "sync_step_down", "reason", "apiserver unreachable", "since", since.Round(time.Millisecond).String(), "error", err)
			cancel(ErrAPIServerUnreachable)
			return false
		}
		return true
	})
}

// startTerm starts a term's informer on the namespace's CronJobs and waits for its cache.
func (s *Synchronizer) startTerm(ctx context.Context, epoch int64) (*term, func(), error) {
	s.mu.Lock()
	s.verified = map[string]*verified{}
	s.prune = pruneVerdict{}
	s.mu.Unlock()
	render := s.cfg.Render
	if render.Installation == "" {
		id, err := s.db.InstallationID(ctx)
		if err != nil {
			return nil, nil, err
		}
		render.Installation = id
	}
	if err := s.checkConfig(ctx, epoch, render); err != nil {
		return nil, nil, err
	}
	s.ensureJobServiceAccount(ctx, render)

	// The informer sees every CronJob of the namespace, not only managed ones: the plan must
	// know an unmanaged CronJob that holds a job's name (to leave it alone, or to adopt the
	// one an import recorded). It acts only on managed ones and that single adoptee.
	// kube.Trim keeps of each CronJob only what the plan reads.
	factory := informers.NewSharedInformerFactoryWithOptions(s.client, 0, informers.WithNamespace(s.cfg.Render.Namespace),
		informers.WithTransform(kube.Trim))
	informer := factory.Batch().V1().CronJobs()
	queue := controller.NewQueue(s.metrics.queue, controller.Exponential(s.cfg.RetryBase, s.cfg.RetryMax), s.log, "job", "")
	t := &term{
		s: s, fence: job.Fence{Epoch: epoch}, render: render, lister: informer.Lister().CronJobs(s.cfg.Render.Namespace), queue: queue,
		echoes: map[string]echo{}, prefetched: map[string]Plan{}, notified: map[string]int64{}, notices: newNotices(),
	}

	enqueue := func(obj any) {
		if cj, ok := cronJobOf(obj); ok {
			queue.Add(cj.Name)
		}
	}
	// The informer's initial list is not queued name by name: the term's first full pass
	// plans every job in memory and queues only those that need work.
	if _, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if !initial && !t.echo(obj) {
				enqueue(obj)
			}
		},
		UpdateFunc: func(_, obj any) {
			if !t.echo(obj) {
				enqueue(obj)
			}
		},
		DeleteFunc: func(obj any) {
			if cj, ok := cronJobOf(obj); ok {
				t.forget(cj.Name)
				queue.Add(cj.Name)
			}
		},
	}); err != nil {
		queue.ShutDown()
		return nil, nil, fmt.Errorf("watch cronjobs: %w", err)
	}
	informerCtx, cancel := context.WithCancel(ctx)
	factory.Start(informerCtx.Done())
	stopTeams, stopPlacements := t.startTeamSecrets(ctx), t.startPlacements(ctx)
	stop := func() {
		stopTeams()
		stopPlacements()
		cancel()
		factory.Shutdown()
	}
	s.log.InfoContext(ctx, "sync_term_started", "epoch", epoch, "namespace", render.Namespace, "installation", render.Installation, "dry_run", s.cfg.DryRun)
	if !cache.WaitForCacheSync(ctx.Done(), informer.Informer().HasSynced) {
		queue.ShutDown()
		stop()
		return nil, nil, fmt.Errorf("wait for cronjob cache: %w", context.Cause(ctx))
	}
	t.builds = s.newBuildStage(t)
	s.cronJobs.Store(&t.lister)
	return t, func() {
		s.cronJobs.Store(nil)
		stop()
		s.endTerm()
	}, nil
}

// finish ends the reconcile of a name handed over to the term's recorder, once its row
// is written (controller.Queue.Finish).
func (t *term) finish(ctx context.Context, name string, res controller.Result, err error) {
	t.queue.Finish(ctx, name, res, err)
}

// resyncKey is a queue item that asks for a full pass; it cannot be a job name.
const resyncKey = "#resync"

// reconcile handles one queue item: a job name, or a full pass.
func (t *term) reconcile(ctx context.Context, name string) (controller.Result, error) {
	switch name {
	case resyncKey:
		_, err := t.pass(ctx)
		return controller.Result{}, err
	case teamSecretsKey:
		return t.reconcileTeamSecrets(ctx)
	case placementsKey:
		return t.reconcilePlacements(ctx)
	}
	p, ok, err := t.prefetchedPlan(name)
	if err != nil {
		return controller.Result{}, err
	}
	if !ok {
		st, live, err := t.load(ctx, name)
		if err != nil {
			return controller.Result{}, err
		}
		p = plan(t.prepare(st), live, t.render, t.s.memo(name))
	}
	if p, err = t.resolve(ctx, p); err != nil {
		return controller.Result{}, err
	}
	p = decide(p, t.verdicts())
	if p.Resync {
		t.queue.Add(resyncKey)
	}
	if p.TeamSecrets {
		t.queue.Add(teamSecretsKey)
	}
	return t.execute(ctx, p)
}

// verdicts is what the term's single reconciles decide by (decide): the standing
// refusals and the latest full pass's approvals.
func (t *term) verdicts() verdicts {
	s := t.s
	v := verdicts{
		restore: s.restoreRefusal(), guardRestore: !s.cfg.DryRun && !s.cfg.AcceptRestore,
		prune: s.pruneVerdict(), installation: t.render.Installation,
	}
	if t.teams != nil {
		v.teamSecret = func(team string) bool {
			_, err := t.teams.lister.Get(kube.TeamOAuthSecretName(team))
			return err == nil
		}
	}
	return v
}

// live returns the CronJob of name from the informer cache (of any owner: the plan
// decides whether it is this installation's), or nil.
func (t *term) live(name string) (*batchv1.CronJob, error) {
	cj, err := t.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return t.ownWrite(name, nil), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read cronjob %s from cache: %w", name, err)
	}
	return t.ownWrite(name, cj), nil
}

// cronJobOf is the CronJob of an informer event, a delete's tombstone included.
func cronJobOf(obj any) (*batchv1.CronJob, bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	cj, ok := obj.(*batchv1.CronJob)
	return cj, ok
}
