package server

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/secrets"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/synchronizer"
)

// openStore opens the main database pool of cfg (serve's and sync --once's), its metrics
// registered in reg.
func openStore(ctx context.Context, cfg Config, reg prometheus.Registerer) (*store.Store, error) {
	return store.Open(ctx, store.Config{
		URL: cfg.DatabaseURL, MaxConns: cfg.Safety.DBMaxConns, StatementTimeout: cfg.Safety.DBStatementTimeout,
		Quotas:  store.TeamQuotas{MaxJobs: cfg.Requests.MaxJobsPerTeam, MaxSourceBytes: cfg.Requests.MaxSourceBytesPerTeam},
		Metrics: store.NewMetrics(reg), Logger: cfg.Logger,
	})
}

// connect builds the Kubernetes client of cfg, named agent/<version> in the apiserver's logs.
func connect(ctx context.Context, cfg Config, agent string) (*kube.Cluster, error) {
	return kube.Connect(ctx, kube.ClusterConfig{Kubeconfig: cfg.Kubeconfig, QPS: cfg.KubeQPS, Burst: cfg.KubeBurst, UserAgent: agent + "/" + cfg.Version})
}

// newSyncer builds the synchronizer of cfg, with the build stage builds (serve's
// newBuildStage; none in a single pass, which builds nothing). It is the one place the
// synchronizer is built, for serve and for sync --once alike, so that both render and
// guard the same way.
func newSyncer(cfg Config, db *store.Store, cluster *kube.Cluster, builds synchronizer.BuildConfig, reg prometheus.Registerer) (*synchronizer.Synchronizer, error) {
	keys, err := loadKeyring(cfg)
	if err != nil {
		return nil, err
	}
	return synchronizer.New(syncerConfig(cfg, builds, keys, reg), db, cluster.Client, nil), nil
}

// syncerConfig is the synchronizer's configuration of cfg: every setting of Config that
// reaches the synchronizer goes through here.
func syncerConfig(cfg Config, builds synchronizer.BuildConfig, keys *secrets.Keyring, reg prometheus.Registerer) synchronizer.Config {
	return synchronizer.Config{
		Build: builds, TeamOAuthKeys: keys,
		Render: kube.RenderConfig{
			Namespace: cfg.Namespace, ImageRegistry: cfg.ImageRegistry, Resources: cfg.Resources, EphemeralStorageLimitBytes: cfg.JobEphemeralStorageBytes,
			JobServiceAccount: cfg.JobServiceAccount, JobAPIURL: cfg.JobAPIURL, ActiveDeadlineSeconds: job.DefaultTimeout(cfg.Executions.MaxTimeout),
		},
		Workers:            cfg.SyncWorkers,
		ResyncInterval:     cfg.ResyncInterval,
		DryRun:             cfg.SyncMode == SyncDryRun,
		PruneMaxFraction:   cfg.Safety.PruneMaxFraction,
		AllowMassPrune:     cfg.Safety.AllowMassPrune,
		AcceptConfigChange: cfg.Safety.AcceptConfigChange,
		AcceptRestore:      cfg.Safety.AcceptRestore,
		StepDownAfter:      stepDownAfter(cfg),
		Logger:             cfg.Logger,
		Metrics:            synchronizer.NewMetrics(reg),
	}
}
