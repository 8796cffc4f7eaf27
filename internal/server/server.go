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

	"github.com/datajobs/datajobs/internal/graphapi"
	"github.com/datajobs/datajobs/internal/httpapi"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/leader"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/synchronizer"
)

// Run serves datajobs until ctx ends, then shuts down gracefully: the HTTP server stops
// accepting, in-flight requests finish, the synchronizer drains and the lease is released.
// ready, when not nil, receives the listener's address once the server accepts connections.
func Run(ctx context.Context, cfg Config, ready chan<- net.Addr) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	log := cfg.Logger
	authn, authz, err := buildAuth(ctx, cfg)
	if err != nil {
		return err
	}

	db, err := store.Open(ctx, store.Config{URL: cfg.DatabaseURL, MaxConns: cfg.Safety.DBMaxConns, StatementTimeout: cfg.Safety.DBStatementTimeout})
	if err != nil {
		return err
	}
	defer db.Close()

	cluster, err := kube.Connect(kube.ClusterConfig{Kubeconfig: cfg.Kubeconfig, QPS: cfg.KubeQPS, Burst: cfg.KubeBurst, UserAgent: "datajobs/" + cfg.Version})
	if err != nil {
		return err
	}

	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	migrated := make(chan struct{})
	health := &health{db: db, cluster: cluster, migrated: migrated}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", health.live)
	mux.HandleFunc("GET /readyz", health.ready)
	// The admin listener: metrics and debugging, never on the public port.
	adminMux := http.NewServeMux()
	adminMux.HandleFunc("GET /healthz", health.live)
	adminMux.HandleFunc("GET /readyz", health.ready)
	adminMux.Handle("GET /metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{Registry: registry}))
	svc, err := service.New(service.Config{
		SupportedPythonVersions: cfg.SupportedPythonVersions,
		DefaultPythonVersion:    cfg.DefaultPythonVersion,
		Resources:               cfg.Resources,
		APIVersion:              "datajobs/" + cfg.Version,
		Sources:                 cfg.Sources,
		LogsURLTemplate:         cfg.Executions.LogsURLTemplate,
		Logs:                    logReader(cfg, cluster),
	}, db)
	if err != nil {
		return err
	}
	jobsQuery, err := graphapi.New(graphapi.Config{DefaultResources: svc.Config().Resources.Default, Logger: log}, db)
	if err != nil {
		return err
	}
	mux.Handle("/", httpapi.New(httpapi.Config{JobsQuery: jobsQuery, Auth: authn, Webhook: authz}, svc, log))

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	adminLn, err := net.Listen("tcp", cfg.AdminListen)
	if err != nil {
		ln.Close()
		return fmt.Errorf("listen on %s (admin): %w", cfg.AdminListen, err)
	}
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       5 * time.Minute, // a 50 MiB sources upload over a slow link
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	adminSrv := &http.Server{Handler: adminMux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, MaxHeaderBytes: 64 << 10}

	var wg sync.WaitGroup
	serveErr := make(chan error, 2)
	for s, l := range map[*http.Server]net.Listener{srv: ln, adminSrv: adminLn} {
		wg.Go(func() {
			if err := s.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				serveErr <- err
			}
		})
	}
	log.InfoContext(ctx, "serving", "address", ln.Addr().String(), "admin_address", adminLn.Addr().String(),
		"namespace", cfg.Namespace, "sync_mode", string(cfg.SyncMode), "auth_mode", string(cfg.Auth.Mode))
	if ready != nil {
		ready <- ln.Addr()
	}
	if cfg.AdminReady != nil {
		cfg.AdminReady <- adminLn.Addr()
	}

	// Migrations are retried until the database answers: the process stays up and
	// reports itself not ready meanwhile, instead of crash-looping. The synchronizer
	// starts once the schema is there.
	synchronize, syncer, err := newSynchronizer(cfg, db, cluster, registry)
	if err != nil {
		return err
	}
	adminMux.Handle("GET /data-jobs/debug/sync-plan", syncPlanHandler(cfg.SyncMode, syncer))
	health.safety.syncer.Store(syncer)
	wg.Go(func() {
		if err := migrateWithRetry(ctx, db, cfg); err != nil {
			return
		}
		close(migrated)
		synchronize(ctx)
	})

	select {
	case <-ctx.Done():
	case err = <-serveErr:
		log.ErrorContext(ctx, "http_server_failed", "error", err)
	}

	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	if shutErr := errors.Join(srv.Shutdown(shutdownCtx), adminSrv.Shutdown(shutdownCtx)); shutErr != nil {
		log.WarnContext(shutdownCtx, "http_shutdown_incomplete", "error", shutErr)
	}
	wg.Wait()
	log.InfoContext(shutdownCtx, "stopped")
	return err
}

func migrateWithRetry(ctx context.Context, db *store.Store, cfg Config) error {
	delay := 500 * time.Millisecond
	for {
		applied, err := db.Migrate(ctx)
		if err == nil {
			cfg.Logger.InfoContext(ctx, "migrations_applied", "versions", applied)
			return nil
		}
		cfg.Logger.WarnContext(ctx, "migrations_failed", "error", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, 10*time.Second)
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

// newSynchronizer returns what runs the synchronizer in this process until ctx ends: under
// the leader lease when it writes, on its own in dry-run mode (it writes nothing), or
// nothing at all when the mode is off.
func newSynchronizer(cfg Config, db *store.Store, cluster *kube.Cluster, reg prometheus.Registerer) (func(context.Context), *synchronizer.Synchronizer, error) {
	if cfg.SyncMode == SyncOff {
		return func(context.Context) {}, nil, nil
	}
	builds, err := newBuildStage(cfg, db, reg)
	if err != nil {
		return nil, nil, err
	}
	syncer := synchronizer.New(synchronizer.Config{
		Build:              builds,
		Render:             kube.RenderConfig{Namespace: cfg.Namespace, ImageRegistry: cfg.ImageRegistry, Resources: cfg.Resources},
		Workers:            cfg.SyncWorkers,
		ResyncInterval:     cfg.ResyncInterval,
		DryRun:             cfg.SyncMode == SyncDryRun,
		PruneMaxFraction:   cfg.Safety.PruneMaxFraction,
		AllowMassPrune:     cfg.Safety.AllowMassPrune,
		AcceptConfigChange: cfg.Safety.AcceptConfigChange,
		StepDownAfter:      stepDownAfter(cfg),
		Logger:             cfg.Logger,
		Metrics:            synchronizer.NewMetrics(reg),
	}, db, cluster.Client, nil)
	var execs *synchronizer.Executions
	if cfg.SyncMode == SyncOn {
		execs = newExecutions(cfg, db, cluster, reg)
	}
	run := func(ctx context.Context, epoch int64) {
		delay := time.Second
		for ctx.Err() == nil {
			err := leaderStages(ctx, epoch, syncer, execs)
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, synchronizer.ErrAPIServerUnreachable) || errors.Is(err, synchronizer.ErrConfigChanged) {
				// End the term: another replica may reach the apiserver, or have the
				// configuration the previous leader synced with.
				cfg.Logger.WarnContext(ctx, "synchronizer_stepped_down", "error", err)
				return
			}
			cfg.Logger.WarnContext(ctx, "synchronizer_stopped", "error", err, "restart_in", delay)
			select {
			case <-ctx.Done():
			case <-time.After(delay):
			}
			delay = min(delay*2, 30*time.Second)
		}
	}
	if cfg.SyncMode == SyncDryRun {
		return func(ctx context.Context) { run(ctx, 0) }, syncer, nil
	}
	metrics, err := leader.NewMetrics(reg)
	if err != nil {
		return nil, nil, err
	}
	elector, err := leader.New(leader.Config{
		Name:          store.SyncLeaseName,
		LeaseDuration: cfg.LeaseDuration,
		Logger:        cfg.Logger,
		Metrics:       metrics,
	}, db)
	if err != nil {
		return nil, nil, err
	}
	return func(ctx context.Context) {
		if err := elector.Run(ctx, run); err != nil {
			cfg.Logger.WarnContext(ctx, "leader_release_failed", "error", err)
		}
	}, syncer, nil
}
