package server

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/datajobs/datajobs/internal/backoff"
	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/leader"
	"github.com/datajobs/datajobs/internal/maintenance"
	"github.com/datajobs/datajobs/internal/metric"
	"github.com/datajobs/datajobs/internal/notify"
	"github.com/datajobs/datajobs/internal/secrets"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/synchronizer"
)

// dbMaxConns is the main pool's size: the flag's, else the URL's pool_max_conns (0: as
// the URL says), else DefaultDBMaxConns.
func dbMaxConns(cfg Config) int32 {
	if cfg.Safety.DBMaxConns == 0 && strings.Contains(cfg.DatabaseURL, "pool_max_conns") {
		return 0
	}
	return cmp.Or(cfg.Safety.DBMaxConns, DefaultDBMaxConns)
}

// openStore opens the main database pool of cfg (serve's and sync --once's), its metrics
// registered in reg.
func openStore(ctx context.Context, cfg Config, reg prometheus.Registerer) (*store.Store, error) {
	return store.Open(ctx, store.Config{
		URL: cfg.DatabaseURL, MaxConns: dbMaxConns(cfg), StatementTimeout: cfg.Safety.DBStatementTimeout,
		Quotas: store.TeamQuotas{
			MaxJobs: cfg.Requests.MaxJobsPerTeam, MaxSourceBytes: cfg.Requests.MaxSourceBytesPerTeam,
			MaxActiveExecutions: cfg.Requests.MaxActiveExecutionsPerTeam,
		},
		Metrics: store.NewMetrics(reg), Logger: cfg.Logger,
		ReadURL: cfg.DatabaseReadURL, ReadMaxLag: cfg.DatabaseReadMaxLag,
	})
}

// connect builds the Kubernetes client of cfg, named agent/<version> in the apiserver's logs.
func connect(ctx context.Context, cfg Config, agent string) (*kube.Cluster, error) {
	return kube.Connect(ctx, kube.ClusterConfig{Kubeconfig: cfg.Kubeconfig, QPS: cfg.KubeQPS, Burst: cfg.KubeBurst, UserAgent: agent + "/" + cfg.Version})
}

// newSyncer builds the synchronizer of execution target t's shard (serve's default
// target, defaultTarget, or another), with the build stage builds (serve's newBuildStage;
// none in a single pass, which builds nothing) and its metrics. It is
// the one place a synchronizer is built, for serve's shards and sync --once alike, so that
// all render and guard the same way: in t's namespace, on t's view of the database.
func newSyncer(cfg Config, db *store.Store, cluster *kube.Cluster, t job.Target, builds synchronizer.BuildConfig, keys *secrets.Keyring, metrics *synchronizer.Metrics) *synchronizer.Synchronizer {
	sc := syncerConfig(cfg, builds, keys, metrics)
	sc.Target, sc.Render.Namespace = t.Name, t.Namespace
	return synchronizer.New(sc, db.Target(t.Name), cluster.Client, nil)
}

// defaultTarget is the default execution target of cfg: serve's --namespace.
func defaultTarget(cfg Config) job.Target {
	return job.Target{Name: job.DefaultTargetName, Namespace: cfg.Namespace}
}

// syncerConfig is the synchronizer's configuration of cfg: every setting of Config that
// reaches the synchronizer goes through here.
func syncerConfig(cfg Config, builds synchronizer.BuildConfig, keys *secrets.Keyring, metrics *synchronizer.Metrics) synchronizer.Config {
	return synchronizer.Config{
		Build: builds, TeamOAuthKeys: keys,
		Render: kube.RenderConfig{
			Namespace: cfg.Namespace, ImageRegistry: cfg.ImageRegistry, Resources: cfg.Resources, EphemeralStorageLimitBytes: cfg.JobEphemeralStorageBytes,
			JobServiceAccount: cfg.JobServiceAccount, JobServiceAccountTemplate: cfg.JobServiceAccountTemplate, JobAPIURL: cfg.JobAPIURL, ActiveDeadlineSeconds: job.DefaultTimeout(cfg.Executions.MaxTimeout),
		},
		Settings:           controller.Settings{Workers: cfg.SyncWorkers, Interval: cfg.ResyncInterval, Logger: cfg.Logger},
		DryRun:             cfg.SyncMode == SyncDryRun,
		PruneMaxFraction:   cfg.Safety.PruneMaxFraction,
		AllowMassPrune:     cfg.Safety.AllowMassPrune,
		AcceptConfigChange: cfg.Safety.AcceptConfigChange,
		AcceptRestore:      cfg.Safety.AcceptRestore,
		StepDownAfter:      stepDownAfter(cfg),
		PlacementGrace:     synchronizer.PlacementGraceFor(cfg.Executions.MaxTimeout),
		Metrics:            metrics,
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
	// shards runs the shards of the execution targets other than the default one (nil
	// when the mode is off).
	shards *shardSet
}

// newSynchronizer returns what runs the synchronizer in this process until ctx ends: under
// the leader lease when it writes, on its own in dry-run mode (it writes nothing), or
// nothing at all when the mode is off.
func newSynchronizer(cfg Config, db *store.Store, cluster *kube.Cluster, reg prometheus.Registerer) (synchronizerUnit, error) {
	maintMetrics := maintenance.NewMetrics(reg)
	u := synchronizerUnit{
		run:   func(context.Context) {},
		state: func() syncState { return syncState{Mode: cfg.SyncMode} },
		upkeep: maintenance.New(maintenance.Config{Logger: cfg.Logger, Metrics: maintMetrics},
			maintenance.NewSyncChanges(maintenance.SyncChangesConfig{Retention: cfg.SyncChangeRetention}, db).Service()),
	}
	if cfg.SyncMode == SyncOff {
		return u, nil
	}
	builds, err := newBuildStage(cfg, db, reg)
	if err != nil {
		return synchronizerUnit{}, err
	}
	keys, err := loadKeyring(cfg)
	if err != nil {
		return synchronizerUnit{}, err
	}
	metrics := newTargetMetrics(reg, job.DefaultTargetName)
	u.syncer = newSyncer(cfg, db, cluster, defaultTarget(cfg), builds, keys, metrics.sync)
	stages := []stage{u.syncer.Run}
	if cfg.SyncMode == SyncOn {
		if u.notify, err = newDispatcher(cfg, db, reg); err != nil {
			return synchronizerUnit{}, err
		}
		stages = append(stages, executionStages(cfg, db, cluster, u.syncer, reg, metrics.tracker, maintMetrics, maintenance.Dispatch(u.notify))...)
	}
	lm := leader.NewMetrics(reg)
	u.shards = &shardSet{
		cfg: cfg, db: db, local: cluster, builds: builds, keys: keys, slots: leader.NewSlots(shardsBound(cfg)), lm: lm, maint: maintMetrics,
		running: map[string]*shard{}, reg: reg, metrics: map[string]targetMetrics{},
		unreachable: metric.On(reg).GaugeVec("datajobs_target_unreachable", "1 while this replica cannot run the shard of the execution target: its cluster unreachable, its apiserver not answering, or its configuration refused.", "target"),
	}
	term := leaderTerm(cfg.Logger, stages)
	if cfg.SyncMode == SyncDryRun {
		u.run = u.withShards(cfg, db, func(ctx context.Context) { term(ctx, 0) })
		return u, nil
	}
	if err := u.elect(cfg, db, lm, term); err != nil {
		return synchronizerUnit{}, err
	}
	return u, nil
}

// shardsBound is the slots' bound before the replicas are counted (shardSet.share):
// --max-shards, or none.
func shardsBound(cfg Config) int {
	if cfg.MaxShards > 0 {
		return cfg.MaxShards
	}
	return math.MaxInt32
}

// withShards runs the default target's shard (run) beside the other targets' shards,
// once the default target is in the database (written from cfg.Namespace on the first
// start after an upgrade: no CronJob moves).
func (u *synchronizerUnit) withShards(cfg Config, db *store.Store, run func(context.Context)) func(context.Context) {
	return func(ctx context.Context) {
		if _, err := db.EnsureDefaultTarget(ctx, cfg.Namespace); err != nil {
			cfg.Logger.WarnContext(ctx, "default_target_unwritten", "error", err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			u.shards.run(ctx)
		}()
		run(ctx)
		<-done
	}
}

// leaderTerm is the work of one leadership term: stages (the synchronizer first, then, in
// sync mode on, the tracker, the leader's maintenance services, the pipeline stepper and
// the trigger firer), started again after a failure until ctx ends, or until a failure
// that ends the term.
func leaderTerm(log *slog.Logger, stages []stage) func(ctx context.Context, epoch int64) {
	return reportedTerm(log, stages, func(error) {})
}

// reportedTerm is leaderTerm telling report why each run of the stages ended (nil: they
// started): a shard's health (shards.go).
func reportedTerm(log *slog.Logger, stages []stage, report func(error)) func(ctx context.Context, epoch int64) {
	return func(ctx context.Context, epoch int64) {
		b := backoff.New(time.Second, 30*time.Second)
		for ctx.Err() == nil {
			report(nil)
			err := leaderStages(ctx, epoch, stages)
			if ctx.Err() != nil {
				return
			}
			report(err)
			if errors.Is(err, synchronizer.ErrAPIServerUnreachable) || errors.Is(err, synchronizer.ErrConfigChanged) {
				// End the term: another replica may reach the apiserver, or have the
				// configuration the previous leader synced with.
				log.WarnContext(ctx, "synchronizer_stepped_down", "error", err)
				return
			}
			log.WarnContext(ctx, "synchronizer_stopped", "error", err, "restart_in", b.Next())
			b.Wait(ctx)
		}
	}
}

// elect makes u run term under the synchronizer's leader lease, and say in its state
// whether this replica leads.
func (u *synchronizerUnit) elect(cfg Config, db *store.Store, metrics *leader.Metrics, term func(context.Context, int64)) error {
	elector, err := leader.New(leader.Config{
		Name:          store.SyncLeaseName,
		LeaseDuration: cfg.LeaseDuration,
		Logger:        cfg.Logger,
		Metrics:       metrics,
		Slots:         u.shards.slots,
	}, db)
	if err != nil {
		return err
	}
	u.run = u.withShards(cfg, db, func(ctx context.Context) {
		if err := elector.Run(ctx, term); err != nil {
			cfg.Logger.WarnContext(ctx, "leader_release_failed", "error", err)
		}
	})
	u.state = func() syncState {
		return syncState{Mode: cfg.SyncMode, Leader: elector.IsLeader(), Shards: u.shards.states()}
	}
	return nil
}
