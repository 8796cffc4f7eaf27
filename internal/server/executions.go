package server

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/firer"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/maintenance"
	"github.com/datajobs/datajobs/internal/stepper"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/synchronizer"
	"github.com/datajobs/datajobs/internal/tracker"
	"github.com/datajobs/datajobs/internal/trigger"
)

// ExecutionsConfig configures executions: how much of their logs is kept, how long they
// are kept, and where their logs_url points.
type ExecutionsConfig struct {
	// LogBytes is how much of the end of a finished execution's log the database keeps
	// (default 256 KiB).
	LogBytes int64
	// KeptPerJob is the number of finished executions kept per job (default 100).
	KeptPerJob int
	// MaxAge deletes finished executions that ended longer ago (default 14 days).
	MaxAge time.Duration
	// ImagePullGrace is how long an image may fail to pull before the execution is a
	// platform error (default 5m).
	ImagePullGrace time.Duration
	// LogsURLTemplate renders logs_url (default none).
	LogsURLTemplate string
	// MaxTimeout bounds a deployment's timeout_seconds (default 24h); below 12 h it is
	// also the timeout of runs whose policy sets none.
	MaxTimeout time.Duration
	// StagedSourcesMaxAge is how long sources staged for an apply wait for the apply that
	// takes them (default 1h; maintenance.RetentionConfig).
	StagedSourcesMaxAge time.Duration
}

// stage is one part of a leadership term's work, run for the term's epoch until ctx ends.
type stage func(ctx context.Context, epoch int64) error

// executionStages builds the default target's execution tracker and the leader's
// services: its maintenance services (with more), the pipeline stepper and the trigger
// firer, wired together (a final status the tracker writes wakes the backfills), as stages
// of the leader's term.
func executionStages(cfg Config, db *store.Store, cluster *kube.Cluster, syncer *synchronizer.Synchronizer, reg prometheus.Registerer, trackerMetrics *tracker.Metrics, metrics *maintenance.Metrics, more ...maintenance.Service) []stage {
	backfills := maintenance.NewBackfills(maintenance.BackfillsConfig{Settings: maintenance.Settings{Logger: cfg.Logger}}, db)
	audit := cfg.AuditRetention
	audit.Logger = cmp.Or(audit.Logger, cfg.Logger)
	services := append([]maintenance.Service{
		backfills.Service(),
		maintenance.NewRetention(maintenance.RetentionConfig{
			Retention:           job.Retention{KeptPerJob: cfg.Executions.KeptPerJob, MaxAge: cfg.Executions.MaxAge},
			StagedSourcesMaxAge: cfg.Executions.StagedSourcesMaxAge, Settings: maintenance.Settings{Logger: cfg.Logger},
		}, db).Service(),
		maintenance.NewAuditRetention(audit, db).Service(),
	}, more...)
	target := defaultTarget(cfg)
	return append(trackerStages(cfg, db.Target(target.Name), target.Namespace, cluster, syncer, trackerMetrics, metrics, backfills.Kick),
		maintenance.New(maintenance.Config{Listener: db, Logger: cfg.Logger, Metrics: metrics}, services...).Run,
		stepper.New(stepper.Config{Settings: controller.Settings{Logger: cfg.Logger}, Registerer: reg}, db).Run,
		firer.New(firer.Config{Settings: controller.Settings{Logger: cfg.Logger}, Registerer: reg, Metrics: trigger.NewMetrics(reg)}, db).Run,
	)
}

// trackerStages builds the execution tracker of one execution target's shard (its Jobs
// in namespace, the runs of view, the CronJobs as the shard's syncer caches them) and the
// services its cache of Jobs tells (the missed runs, a run the CronJob controller started;
// the lateness), as stages of the shard's term. onFinal, when set, hears each final status
// the tracker writes.
func trackerStages(cfg Config, view store.TargetView, namespace string, cluster *kube.Cluster, syncer *synchronizer.Synchronizer,
	metrics *tracker.Metrics, maintMetrics *maintenance.Metrics, onFinal func(),
) []stage {
	execs := tracker.New(tracker.Config{
		Namespace:      namespace,
		CronJobs:       syncer.CronJobs,
		Settings:       controller.Settings{Interval: cfg.ResyncInterval, Logger: cfg.Logger},
		ImagePullGrace: cfg.Executions.ImagePullGrace,
		LogBytes:       cfg.Executions.LogBytes,
		OnFinal:        onFinal,
		Metrics:        metrics,
	}, view, cluster.Client)
	services := []maintenance.Service{
		maintenance.NewMissedRuns(maintenance.MissedRunsConfig{Jobs: execs, Settings: maintenance.Settings{Logger: cfg.Logger}}, view).Service(),
		maintenance.NewLateness(maintenance.LatenessConfig{Jobs: execs}, view).Service(),
	}
	return []stage{execs.Run, maintenance.New(maintenance.Config{Listener: view, Logger: cfg.Logger, Metrics: maintMetrics}, services...).Run}
}

const (
	// targetLogsTTL is how long the API keeps its connection to another cluster for log
	// reads: a kubeconfig Secret rotated is read again after that.
	targetLogsTTL = 5 * time.Minute
	// targetConnectTimeout bounds reading a target's kubeconfig Secret and connecting.
	targetConnectTimeout = 5 * time.Second
)

// targetLogs reads running executions' logs for the API in the execution target each
// runs in (bounded; see kube.LogReader): a local target's namespace through the
// service's own client, another cluster through its kubeconfig Secret (targetCluster),
// connected at the first read and kept for targetLogsTTL.
type targetLogs struct {
	cfg   Config
	local *kube.Cluster
	bound kube.LogConfig

	mu     sync.Mutex
	remote map[string]remoteLogs // by target name
}

// remoteLogs is the reader of a target in another cluster, connected at.
type remoteLogs struct {
	place  job.Target
	reader *kube.LogReader
	at     time.Time
}

// logReader reads running executions' logs for the API.
func logReader(cfg Config, cluster *kube.Cluster) *targetLogs {
	return &targetLogs{
		cfg: cfg, local: cluster, remote: map[string]remoteLogs{},
		bound: kube.LogConfig{MaxBytes: cmp.Or(cfg.Executions.LogBytes, tracker.DefaultLogBytes) * 4},
	}
}

// ExecutionLog reads the log of the Job id's pods in target t (service.LogReader). A
// cluster that cannot be reached is an error within the read's time bound.
func (l *targetLogs) ExecutionLog(ctx context.Context, t job.Target, id string, tailLines int) (string, bool, error) {
	r, err := l.reader(ctx, t)
	if err != nil {
		return "", false, err
	}
	return r.ExecutionLog(ctx, id, tailLines)
}

// reader is the log reader of target t's namespace and cluster.
func (l *targetLogs) reader(ctx context.Context, t job.Target) (*kube.LogReader, error) {
	switch {
	case t.Name == job.DefaultTargetName:
		return kube.NewLogReader(l.local.Client, l.cfg.Namespace, l.bound), nil
	case t.Namespace == "":
		return nil, fmt.Errorf("the execution target %s is gone", t.Name)
	case t.Local():
		return kube.NewLogReader(l.local.Client, t.Namespace, l.bound), nil
	}
	now := time.Now()
	l.mu.Lock()
	kept, ok := l.remote[t.Name]
	l.mu.Unlock()
	if ok && kept.place.SamePlace(t) && now.Sub(kept.at) < targetLogsTTL {
		return kept.reader, nil
	}
	ctx, cancel := context.WithTimeout(ctx, targetConnectTimeout)
	defer cancel()
	cluster, err := targetCluster(ctx, l.cfg, l.local, t)
	if err != nil {
		return nil, fmt.Errorf("connect to the cluster of target %s: %w", t.Name, err)
	}
	r := kube.NewLogReader(cluster.Client, t.Namespace, l.bound)
	l.mu.Lock()
	defer l.mu.Unlock()
	for name, k := range l.remote {
		if now.Sub(k.at) >= targetLogsTTL {
			delete(l.remote, name)
		}
	}
	l.remote[t.Name] = remoteLogs{place: t, reader: r, at: now}
	return r, nil
}

// leaderStages runs stages for one leadership term, and returns when all have stopped
// (the first to return ends the term for all).
func leaderStages(ctx context.Context, epoch int64, stages []stage) error {
	if len(stages) == 1 {
		return stages[0](ctx, epoch)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var g errgroup.Group
	for _, run := range stages {
		g.Go(func() error {
			defer cancel()
			return run(ctx, epoch)
		})
	}
	return g.Wait()
}
