package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/datajobs/datajobs/internal/backoff"
	"github.com/datajobs/datajobs/internal/graphapi"
	"github.com/datajobs/datajobs/internal/httpapi"
	"github.com/datajobs/datajobs/internal/jobidentity"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/leader"
	"github.com/datajobs/datajobs/internal/maintenance"
	"github.com/datajobs/datajobs/internal/notify"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/slots"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/synchronizer"
	"github.com/datajobs/datajobs/internal/tracker"
	"github.com/datajobs/datajobs/internal/vdkmetrics"
)

// Run serves datajobs until ctx ends, then shuts down gracefully: the HTTP servers stop
// accepting, in-flight requests have ShutdownTimeout to finish before their contexts are
// cancelled, the synchronizer drains and the lease is released. Everything is built before
// the listeners open, so a configuration error never leaves a server running; every
// goroutine Run starts has returned when Run does. ready, when not nil, receives the
// listener's address once the server accepts connections.
func Run(ctx context.Context, cfg Config, ready chan<- net.Addr) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	a, err := newApp(ctx, cfg)
	if err != nil {
		return err
	}
	defer a.db.Close()
	return a.serve(ctx, ready)
}

// app is everything Run builds before it opens a listener.
type app struct {
	cfg       Config
	db        *store.Store
	public    http.Handler
	admin     http.Handler
	kubeProbe *kubeProbe
	sync      synchronizerUnit
	// upkeep is the maintenance every replica runs, leader or not (the change log's bound).
	upkeep  *maintenance.Maintainer
	jobs    *jobidentity.Verifier
	secrets *service.Secrets
	// migrated is closed once the schema is there (readiness waits for it).
	migrated chan struct{}
}

// newApp connects to the database and the cluster and builds the handlers and the
// synchronizer; it starts nothing.
func newApp(ctx context.Context, cfg Config) (a *app, err error) {
	authn, authz, err := buildAuth(ctx, cfg)
	if err != nil {
		return nil, err
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	db, err := openStore(ctx, cfg, registry)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			db.Close()
		}
	}()
	cluster, err := connect(ctx, cfg, "datajobs")
	if err != nil {
		return nil, err
	}
	if cfg.Notifications.VDKJobMetrics {
		registry.MustRegister(vdkmetrics.New(db, vdkmetrics.Config{Logger: cfg.Logger}))
	}
	svc, secretsSvc, err := newUseCases(cfg, db, cluster)
	if err != nil {
		return nil, err
	}
	syncUnit, err := newSynchronizer(cfg, db, cluster, registry)
	if err != nil {
		return nil, err
	}
	jobs, err := newJobIdentity(cfg, cluster, db)
	if err != nil {
		return nil, err
	}
	a = &app{cfg: cfg, db: db, sync: syncUnit, jobs: jobs, secrets: secretsSvc, migrated: make(chan struct{}), kubeProbe: newKubeProbe(cluster.Ping, 10*time.Second, registry)}
	if err = a.buildHandlers(ctx, svc, authn, authz, registry); err != nil {
		return nil, err
	}
	return a, nil
}

// newUseCases builds the use cases the API and the console share: the service and the
// secrets, both with the key file's keyring.
func newUseCases(cfg Config, db *store.Store, cluster *kube.Cluster) (*service.Service, *service.Secrets, error) {
	keys, err := loadKeyring(cfg)
	if err != nil {
		return nil, nil, err
	}
	svc, err := service.New(service.Config{
		SupportedPythonVersions: cfg.SupportedPythonVersions,
		DefaultPythonVersion:    cfg.DefaultPythonVersion,
		Resources:               cfg.Resources,
		APIVersion:              "datajobs/" + cfg.Version,
		Sources:                 cfg.Sources,
		LogsURLTemplate:         cfg.Executions.LogsURLTemplate,
		MaxExecutionTimeout:     cfg.Executions.MaxTimeout,
		Logs:                    logReader(cfg, cluster),
		WebhookAllowPrivate:     cfg.NotificationWebhookAllowPrivate,
		Keys:                    keys,
	}, db)
	if err != nil {
		return nil, nil, err
	}
	secretsSvc, err := buildSecrets(cfg, db, keys)
	return svc, secretsSvc, err
}

// buildHandlers builds a's public handler (health, console, REST and GraphQL API) and its
// admin handler (health with details, metrics, the synchronizer's plan, profiles).
func (a *app) buildHandlers(ctx context.Context, svc *service.Service, authn httpapi.Authenticator, authz httpapi.Authorizer, registry *prometheus.Registry) error {
	cfg, syncUnit := a.cfg, a.sync
	admission := slots.Queue{Wait: cfg.Requests.AdmissionWait, WaitFlag: "--admission-wait", Metrics: slots.NewMetrics(registry)}
	jobsQuery, err := graphapi.New(graphapi.Config{
		DefaultResources: svc.Config().Resources.Default, Logger: cfg.Logger, MaxExecutionTimeout: cfg.Executions.MaxTimeout,
		Timeout: cfg.Requests.GraphQLTimeout, DisableIntrospection: cfg.Requests.DisableGraphQLIntrospection,
		MaxQueryBytes: cfg.Requests.GraphQLMaxQueryBytes, MaxConcurrent: cfg.Requests.MaxConcurrentGraphQL,
		Webhook: authz, Admission: admission,
	}, svc)
	if err != nil {
		return err
	}
	health := &health{db: a.db, migrated: a.migrated, kube: a.kubeProbe, sync: syncUnit.state, notify: syncUnit.notify, log: cfg.Logger}
	health.safety.syncer.Store(syncUnit.syncer)

	logReads := httpapi.NewLogReadSlots(cfg.Requests.MaxConcurrentLogReads, cfg.Requests.MaxLogReadsPerCaller, admission)
	console, err := consoleHandler(ctx, cfg, svc, a.db, logReads, authn, authz, syncUnit.syncer, a.secrets)
	if err != nil {
		return err
	}
	api := httpapi.New(httpapi.Config{
		JobsQuery: jobsQuery, Auth: authn, Webhook: authz, Jobs: a.jobs,
		Limits: cfg.Requests.Limits, LogReads: logReads,
		Metrics: httpapi.NewMetrics(registry), Secrets: a.secrets, Admission: admission,
	}, svc, cfg.Logger)
	a.public = mux(publicRoutes(health, console, api))
	a.admin = mux(adminRoutes(health, promhttp.HandlerFor(registry, promhttp.HandlerOpts{Registry: registry}),
		syncPlanHandler(cfg.SyncMode, syncUnit.syncer), cfg.AdminProfiling))
	return nil
}

// serve opens the listeners, runs the servers, the probe, the migrations and then the
// synchronizer until ctx ends or a server fails, and shuts them down gracefully.
func (a *app) serve(ctx context.Context, ready chan<- net.Addr) error {
	cfg, log := a.cfg, a.cfg.Logger
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	adminLn, err := net.Listen("tcp", cfg.AdminListen)
	if err != nil {
		ln.Close()
		return fmt.Errorf("listen on %s (admin): %w", cfg.AdminListen, err)
	}
	// Requests run under their own context: a shutdown lets them finish, then cancels
	// them when the grace period is over.
	requests, cancelRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRequests()
	srv := &http.Server{
		Handler:           a.public,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       5 * time.Minute, // a 50 MiB sources upload over a slow link
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return requests },
	}
	adminSrv := &http.Server{
		Handler: a.admin, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, MaxHeaderBytes: 64 << 10,
		BaseContext: func(net.Listener) context.Context { return requests },
	}

	// background ends when ctx does, or when a server fails.
	background, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	serveErr := make(chan error, 3)
	for s, l := range map[*http.Server]net.Listener{srv: ln, adminSrv: adminLn} {
		wg.Go(func() {
			if err := s.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				serveErr <- err
			}
		})
	}
	wg.Go(func() { _ = maintenance.New(maintenance.Config{Logger: log}, a.kubeProbe.service()).Run(background, 0) })
	wg.Go(func() { a.jobs.Run(background) })
	// Migrations are retried until the database answers: the process stays up and
	// reports itself not ready meanwhile, instead of crash-looping. The synchronizer
	// starts once the schema is there.
	wg.Go(func() {
		if err := migrateWithRetry(background, a.db, cfg); err != nil {
			return
		}
		// A database whose secrets this key file cannot open is refused, not served.
		if err := a.secrets.CheckKeys(background); err != nil {
			serveErr <- err
			return
		}
		close(a.migrated)
		wg.Go(func() { _ = a.sync.upkeep.Run(background, 0) })
		a.sync.run(background)
	})
	log.InfoContext(ctx, "serving", "address", ln.Addr().String(), "admin_address", adminLn.Addr().String(),
		"namespace", cfg.Namespace, "sync_mode", string(cfg.SyncMode), "auth_mode", string(cfg.Auth.Mode))
	if ready != nil {
		ready <- ln.Addr()
	}
	if cfg.AdminReady != nil {
		cfg.AdminReady <- adminLn.Addr()
	}

	select {
	case <-ctx.Done():
	case err = <-serveErr:
		log.ErrorContext(ctx, "http_server_failed", "error", err)
	}
	stop()

	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	if shutErr := errors.Join(srv.Shutdown(shutdownCtx), adminSrv.Shutdown(shutdownCtx)); shutErr != nil {
		log.WarnContext(shutdownCtx, "http_shutdown_incomplete", "error", shutErr)
		cancelRequests()
		_ = errors.Join(srv.Close(), adminSrv.Close())
	}
	wg.Wait()
	log.InfoContext(shutdownCtx, "stopped")
	return err
}

func migrateWithRetry(ctx context.Context, db *store.Store, cfg Config) error {
	b := backoff.New(500*time.Millisecond, 10*time.Second)
	for {
		applied, err := db.Migrate(ctx)
		if err == nil {
			cfg.Logger.InfoContext(ctx, "migrations_applied", "versions", applied)
			return nil
		}
		cfg.Logger.WarnContext(ctx, "migrations_failed", "error", err, "retry_in", b.Next())
		if !b.Wait(ctx) {
			return ctx.Err()
		}
	}
}

// stepDownAfter is how long a leader keeps its term without reaching the apiserver: the
// lease duration. A dry run holds no lease and never steps down.
func stepDownAfter(cfg Config) time.Duration {
	if cfg.SyncMode != SyncOn {
		return 0
	}
	return cfg.LeaseDuration
}

// synchronizerUnit is what runs the synchronizer in this process.
type synchronizerUnit struct {
	// run runs it until ctx ends.
	run func(ctx context.Context)
	// syncer is the synchronizer, nil when the mode is off.
	syncer *synchronizer.Synchronizer
	// state is its part of the /healthz detail.
	state func() syncState
	// notify is the leader's notification dispatcher, nil unless the mode is on.
	notify *notify.Dispatcher
	// upkeep is the maintenance every replica runs, leader or not, in every mode: the
	// change log's bound.
	upkeep *maintenance.Maintainer
}

// newSynchronizer returns what runs the synchronizer in this process until ctx ends: under
// the leader lease when it writes, on its own in dry-run mode (it writes nothing), or
// nothing at all when the mode is off.
func newSynchronizer(cfg Config, db *store.Store, cluster *kube.Cluster, reg prometheus.Registerer) (synchronizerUnit, error) {
	state := func() syncState { return syncState{Mode: cfg.SyncMode} }
	maintMetrics := maintenance.NewMetrics(reg)
	upkeep := maintenance.New(maintenance.Config{Logger: cfg.Logger, Metrics: maintMetrics},
		maintenance.NewSyncChanges(maintenance.SyncChangesConfig{Retention: cfg.SyncChangeRetention}, db).Service())
	if cfg.SyncMode == SyncOff {
		return synchronizerUnit{run: func(context.Context) {}, state: state, upkeep: upkeep}, nil
	}
	builds, err := newBuildStage(cfg, db, reg)
	if err != nil {
		return synchronizerUnit{}, err
	}
	syncer, err := newSyncer(cfg, db, cluster, builds, reg)
	if err != nil {
		return synchronizerUnit{}, err
	}
	var (
		execs      *tracker.Tracker
		maint      *maintenance.Maintainer
		dispatcher *notify.Dispatcher
	)
	if cfg.SyncMode == SyncOn {
		if dispatcher, err = newDispatcher(cfg, db, reg); err != nil {
			return synchronizerUnit{}, err
		}
		execs, maint = newTracker(cfg, db, cluster, reg, maintMetrics, maintenance.Dispatch(dispatcher))
	}
	run := func(ctx context.Context, epoch int64) {
		b := backoff.New(time.Second, 30*time.Second)
		for ctx.Err() == nil {
			err := leaderStages(ctx, epoch, syncer, execs, maint)
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, synchronizer.ErrAPIServerUnreachable) || errors.Is(err, synchronizer.ErrConfigChanged) {
				// End the term: another replica may reach the apiserver, or have the
				// configuration the previous leader synced with.
				cfg.Logger.WarnContext(ctx, "synchronizer_stepped_down", "error", err)
				return
			}
			cfg.Logger.WarnContext(ctx, "synchronizer_stopped", "error", err, "restart_in", b.Next())
			b.Wait(ctx)
		}
	}
	if cfg.SyncMode == SyncDryRun {
		return synchronizerUnit{run: func(ctx context.Context) { run(ctx, 0) }, syncer: syncer, state: state, upkeep: upkeep}, nil
	}
	metrics, err := leader.NewMetrics(reg)
	if err != nil {
		return synchronizerUnit{}, err
	}
	elector, err := leader.New(leader.Config{
		Name:          store.SyncLeaseName,
		LeaseDuration: cfg.LeaseDuration,
		Logger:        cfg.Logger,
		Metrics:       metrics,
	}, db)
	if err != nil {
		return synchronizerUnit{}, err
	}
	return synchronizerUnit{
		run: func(ctx context.Context) {
			if err := elector.Run(ctx, run); err != nil {
				cfg.Logger.WarnContext(ctx, "leader_release_failed", "error", err)
			}
		},
		syncer: syncer, notify: dispatcher, upkeep: upkeep,
		state: func() syncState { return syncState{Mode: cfg.SyncMode, Leader: elector.IsLeader()} },
	}, nil
}
