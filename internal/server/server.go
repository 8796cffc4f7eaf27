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
	"github.com/datajobs/datajobs/internal/maintenance"
	"github.com/datajobs/datajobs/internal/replicaread"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/slots"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/trigger"
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
	jobs      *jobidentity.Verifier
	secrets   *service.Secrets
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
	svc, secretsSvc, err := newUseCases(cfg, db, cluster, registry)
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
func newUseCases(cfg Config, db *store.Store, cluster *kube.Cluster, reg prometheus.Registerer) (*service.Service, *service.Secrets, error) {
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
		TriggerMetrics:          trigger.NewMetrics(reg),
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
	replicaReads := replicaread.New(a.db, cfg.Logger)
	console, err := consoleHandler(ctx, cfg, svc, a.db, logReads, authn, authz, syncUnit.syncer, a.secrets, replicaReads)
	if err != nil {
		return err
	}
	api := httpapi.New(httpapi.Config{
		JobsQuery: jobsQuery, Auth: authn, Webhook: authz, Jobs: a.jobs,
		Limits: cfg.Requests.Limits, LogReads: logReads, JobTokenTeamExecutions: cfg.Auth.JobTokenTeamExecutions,
		Metrics: httpapi.NewMetrics(registry), Secrets: a.secrets, Admission: admission, ReplicaReads: replicaReads,
	}, svc, cfg.Logger)
	a.public = mux(publicRoutes(health, console, api))
	if cfg.Auth.Mode == AuthNone {
		a.public = localOnly(a.public) // every caller is an admin: only this machine's
	}
	a.admin = mux(adminRoutes(health, promhttp.HandlerFor(registry, promhttp.HandlerOpts{Registry: registry}),
		syncPlanHandler(cfg.SyncMode, syncUnit.syncer), cfg.AdminProfiling))
	if loopback(cfg.AdminListen) {
		a.admin = localOnly(a.admin) // else a rebinding page reads the metrics and the plan
	}
	return nil
}

// serve opens the listeners, runs the servers, the probe, the migrations and then the
// synchronizer until ctx ends or a server fails, and shuts them down gracefully.
func (a *app) serve(ctx context.Context, ready chan<- net.Addr) error {
	cfg, log := a.cfg, a.cfg.Logger
	ln, adminLn, err := listen(cfg)
	if err != nil {
		return err
	}
	// Requests run under their own context: a shutdown lets them finish, then cancels
	// them when the grace period is over.
	requests, cancelRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRequests()
	srv, adminSrv := a.servers(requests)

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
	a.runBackground(background, &wg, serveErr)
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

// listen opens the API's and the admin listeners of cfg.
func listen(cfg Config) (api, admin net.Listener, err error) {
	api, err = net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, nil, fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	admin, err = net.Listen("tcp", cfg.AdminListen)
	if err != nil {
		api.Close()
		return nil, nil, fmt.Errorf("listen on %s (admin): %w", cfg.AdminListen, err)
	}
	return api, admin, nil
}

// servers are the API's and the admin HTTP servers, whose requests run under requests.
func (a *app) servers(requests context.Context) (api, admin *http.Server) {
	base := func(net.Listener) context.Context { return requests }
	api = &http.Server{
		Handler:           a.public,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       5 * time.Minute, // a 50 MiB sources upload over a slow link
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       base,
	}
	admin = &http.Server{
		Handler: a.admin, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, MaxHeaderBytes: 64 << 10,
		BaseContext: base,
	}
	return api, admin
}

// runBackground starts, in wg, what runs beside the servers until ctx ends: the
// apiserver probe and the migrations, then the job tokens' verifier (its issuer, the
// installation's id and its pod watch), the upkeep and the synchronizer. A failure that
// must stop the server goes to serveErr.
func (a *app) runBackground(ctx context.Context, wg *sync.WaitGroup, serveErr chan<- error) {
	wg.Go(func() {
		_ = maintenance.New(maintenance.Config{Logger: a.cfg.Logger}, a.kubeProbe.service()).Run(ctx, 0)
	})
	// Migrations are retried until the database answers: the process stays up and
	// reports itself not ready meanwhile, instead of crash-looping. What reads the schema
	// starts once it is there: the verifier reads the installation's id (on a first start
	// it warned that relation "installation" does not exist, issue 48), the synchronizer
	// everything.
	wg.Go(func() {
		if err := migrateWithRetry(ctx, a.db, a.cfg); err != nil {
			return
		}
		// A database whose secrets this key file cannot open is refused, not served.
		if err := a.secrets.CheckKeys(ctx); err != nil {
			serveErr <- err
			return
		}
		close(a.migrated)
		wg.Go(func() { a.jobs.Run(ctx) })
		wg.Go(func() { _ = a.sync.upkeep.Run(ctx, 0) })
		a.sync.run(ctx)
	})
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
