package server

import (
	"cmp"
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/datajobs/datajobs/internal/backoff"
	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/leader"
	"github.com/datajobs/datajobs/internal/maintenance"
	"github.com/datajobs/datajobs/internal/secrets"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/synchronizer"
)

// shardsResync is how often a replica reads the targets again without a NOTIFY.
const shardsResync = 30 * time.Second

// shardSet runs this replica's synchronizer shards of the execution targets other than
// the default one (issue 44, docs/targets.md): each a synchronizer, tracker and the
// services its Jobs tell, in the target's namespace and cluster, under a lease of its
// own (store.ShardLeaseName), so that one unreachable cluster holds only its own shard.
// The default target's shard is the synchronizerUnit's, as before targets. It starts,
// stops and restarts shards as the targets change (TargetsChannel, or every
// shardsResync), and each replica holds at most cfg.MaxShards of all leases (leader.Slots).
type shardSet struct {
	cfg    Config
	db     *store.Store
	local  *kube.Cluster
	builds synchronizer.BuildConfig
	keys   *secrets.Keyring
	slots  *leader.Slots
	lm     *leader.Metrics
	maint  *maintenance.Metrics
	// unreachable is 1 for a target whose shard this replica cannot run: its cluster
	// unreachable, its apiserver stopped answering, or its configuration refused.
	unreachable *prometheus.GaugeVec
	reg         prometheus.Registerer // where each target's metrics go (targetMetrics)

	mu      sync.Mutex
	running map[string]*shard
	metrics map[string]targetMetrics // by target, made at its shard's first start
	wg      sync.WaitGroup
}

// shard is one running target's shard.
type shard struct {
	target  job.Target
	stop    context.CancelFunc
	elector *leader.Elector // nil in dry-run mode
	mu      sync.Mutex
	err     string    // why it is not running (its cluster unreachable), "" when it is
	written time.Time // when err was last written to the database (shardSet.report)
}

// shardState is a shard's part of the /healthz detail.
type shardState struct {
	Target    string `json:"target"`
	Namespace string `json:"namespace"`
	Leader    bool   `json:"leader"`
	Error     string `json:"error,omitempty"`
}

// run keeps the shards of every target but the default running until ctx ends, then
// stops them and waits for them.
func (s *shardSet) run(ctx context.Context) {
	woken := make(chan struct{}, 1)
	wake := func() {
		select {
		case woken <- struct{}{}:
		default:
		}
	}
	s.wg.Go(func() {
		controller.Listen(ctx, s.db, store.TargetsChannel, time.Second, s.cfg.Logger, func(bool) { wake() }, func(string) { wake() })
	})
	if s.cfg.SyncMode == SyncOn {
		s.wg.Go(func() { s.share(ctx) })
	}
	s.reconcile(ctx)
	controller.EveryOrWoken(ctx, shardsResync, woken, func() bool {
		s.reconcile(ctx)
		return true
	})
	s.mu.Lock()
	for _, sh := range s.running {
		sh.stop()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// reconcile starts the shard of each new target, restarts that of a target whose place
// changed, and stops that of a target deleted.
func (s *shardSet) reconcile(ctx context.Context) {
	targets, err := s.db.ListTargets(ctx)
	if err != nil {
		s.cfg.Logger.WarnContext(ctx, "targets_unreadable", "error", err)
		return
	}
	want := map[string]job.Target{}
	for _, t := range targets {
		if t.Name != job.DefaultTargetName {
			want[t.Name] = t
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, sh := range s.running {
		if t, ok := want[name]; !ok || !t.SamePlace(sh.target) {
			s.cfg.Logger.InfoContext(ctx, "shard_stopped", "target", name)
			sh.stop()
			delete(s.running, name)
			if !ok {
				s.metrics[name].unregister()
				delete(s.metrics, name)
			}
		}
	}
	for name, t := range want {
		if _, ok := s.running[name]; !ok {
			s.running[name] = s.start(ctx, t)
		}
	}
}

// start starts the shard of target t (s.mu held).
func (s *shardSet) start(ctx context.Context, t job.Target) *shard {
	ctx, stop := context.WithCancel(ctx)
	sh := &shard{target: t, stop: stop}
	if s.cfg.SyncMode == SyncOn {
		elector, err := leader.New(leader.Config{
			Name: store.ShardLeaseName(t.Name), LeaseDuration: s.cfg.LeaseDuration, Logger: s.cfg.Logger, Metrics: s.lm, Slots: s.slots,
		}, s.db)
		if err != nil {
			sh.fail(err, time.Now())
			return sh
		}
		sh.elector = elector
	}
	s.wg.Go(func() { s.runShard(ctx, sh) })
	s.cfg.Logger.InfoContext(ctx, "shard_started", "target", t.Name, "namespace", t.Namespace, "local", t.Local())
	return sh
}

// runShard connects to the shard's cluster (again after a failure, with backoff) and
// runs its term under its lease until ctx ends.
func (s *shardSet) runShard(ctx context.Context, sh *shard) {
	b := backoff.New(time.Second, shardsResync)
	cluster, err := s.connect(ctx, sh.target)
	for err != nil {
		s.failed(sh, fmt.Errorf("connect to the cluster of target %s: %w", sh.target.Name, err))
		s.cfg.Logger.WarnContext(ctx, "shard_cluster_unreachable", "target", sh.target.Name, "error", err, "retry_in", b.Next())
		if !b.Wait(ctx) {
			return
		}
		cluster, err = s.connect(ctx, sh.target)
	}
	s.failed(sh, nil)
	term := reportedTerm(s.cfg.Logger.With("target", sh.target.Name), s.stages(sh.target, cluster), func(err error) {
		s.failed(sh, err)
	})
	if sh.elector == nil {
		term(ctx, 0)
		return
	}
	if err := sh.elector.Run(ctx, term); err != nil {
		s.cfg.Logger.WarnContext(ctx, "leader_release_failed", "target", sh.target.Name, "error", err)
	}
}

// stages are the shard of target t's stages: its synchronizer, and in sync mode on its
// tracker and the services its Jobs tell, with the target's metrics.
func (s *shardSet) stages(t job.Target, cluster *kube.Cluster) []stage {
	m := s.metricsOf(t.Name)
	syncer := newSyncer(s.cfg, s.db, cluster, t, s.builds, s.keys, m.sync)
	stages := []stage{syncer.Run}
	if s.cfg.SyncMode == SyncOn {
		stages = append(stages, trackerStages(s.cfg, s.db.Target(t.Name), t.Namespace, cluster, syncer, m.tracker, s.maint, nil)...)
	}
	return stages
}

// metricsOf is target's metrics, registered at its shard's first start; a shard whose
// target was deleted while it connected gets metrics registered nowhere, which the
// deletion could not take away.
func (s *shardSet) metricsOf(target string) targetMetrics {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, running := s.running[target]; !running {
		return newTargetMetrics(nil, target)
	}
	m, ok := s.metrics[target]
	if !ok {
		m = newTargetMetrics(s.reg, target)
		s.metrics[target] = m
	}
	return m
}

// connect is the cluster of target t (targetCluster).
func (s *shardSet) connect(ctx context.Context, t job.Target) (*kube.Cluster, error) {
	return targetCluster(ctx, s.cfg, s.local, t)
}

// targetCluster is the cluster of target t: local, the service's own, or the one its
// Secret's kubeconfig reaches (the Secret in the default target's namespace).
func targetCluster(ctx context.Context, cfg Config, local *kube.Cluster, t job.Target) (*kube.Cluster, error) {
	if t.Local() {
		return local, nil
	}
	data, err := kube.KubeconfigFromSecret(ctx, local.Client, cfg.Namespace, t.KubeconfigSecret)
	if err != nil {
		return nil, err
	}
	return kube.Connect(ctx, kube.ClusterConfig{
		KubeconfigData: data, QPS: cfg.KubeQPS, Burst: cfg.KubeBurst, UserAgent: "datajobs/" + cfg.Version,
	})
}

// failed records why sh does not run (nil: it runs) in its /healthz detail, in
// datajobs_target_unreachable and, when that changed or was last written shardsResync
// ago, in the database for the console of every replica (docs/targets.md, "An
// unreachable target").
func (s *shardSet) failed(sh *shard, err error) {
	if sh.fail(err, time.Now()) {
		s.report(sh.target.Name, err)
	}
	v := 0.0
	if err != nil {
		v = 1
	}
	s.unreachable.WithLabelValues(sh.target.Name).Set(v)
}

// report writes the outage of target (err nil: its end). An outage is shown for three
// renewals (shardsResync plus a term that fails after a lease): a replica that dies
// lets it lapse. Its end holds it for two leases: a new term reports the shard running
// until it notices, a lease later, that its apiserver still does not answer.
func (s *shardSet) report(target string, err error) {
	lease := cmp.Or(s.cfg.LeaseDuration, leader.DefaultLeaseDuration)
	ctx, cancel := context.WithTimeout(context.Background(), lease)
	defer cancel()
	var write error
	if err != nil {
		write = s.db.ReportTargetUnreachable(ctx, target, err.Error(), 3*(shardsResync+lease))
	} else {
		write = s.db.ReportTargetReachable(ctx, target, 2*lease)
	}
	if write != nil {
		s.cfg.Logger.WarnContext(ctx, "target_health_unwritten", "target", target, "error", write)
	}
}

// fail sets sh's error, and says whether to write it: it changed, was never written, or
// is an error last written shardsResync ago.
func (sh *shard) fail(err error, now time.Time) (write bool) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	changed := (msg == "") != (sh.err == "")
	sh.err = msg
	if changed || sh.written.IsZero() || (msg != "" && now.Sub(sh.written) >= shardsResync) {
		sh.written = now
		return true
	}
	return false
}

// states is every shard's part of the /healthz detail, by target.
func (s *shardSet) states() []shardState {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]shardState, 0, len(s.running))
	for _, sh := range s.running {
		sh.mu.Lock()
		st := shardState{Target: sh.target.Name, Namespace: sh.target.Namespace, Error: sh.err}
		sh.mu.Unlock()
		st.Leader = sh.elector != nil && sh.elector.IsLeader()
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Target < out[j].Target })
	return out
}

// share keeps this replica's share of the shards (its slots' bound) at the targets over
// the live replicas, rounded up, and at most cfg.MaxShards, from a presence row it
// renews every lease/5, as often as a leader renews its lease. A replica stops counting
// after three renewals missed, before its leases expire, so that a survivor's share has
// grown by then and it campaigns for a dead replica's lease the moment it expires (with
// a lease duration of silence, the e2e survivor led both shards 11.7 s after a SIGKILL of
// the other, its share grown only seconds after the lease had expired). A replica
// merely slow for that long loses no lease by it: the others take only expired ones.
func (s *shardSet) share(ctx context.Context) {
	identity, err := leader.DefaultIdentity()
	if err != nil {
		s.cfg.Logger.WarnContext(ctx, "shard_share_unknown", "error", err)
		return
	}
	lease := cmp.Or(s.cfg.LeaseDuration, leader.DefaultLeaseDuration)
	renew := lease / 5
	update := func() bool {
		replicas, targets, err := s.db.ReplicaSeen(ctx, identity, 3*renew)
		if err != nil {
			if ctx.Err() == nil {
				s.cfg.Logger.WarnContext(ctx, "shard_share_unknown", "error", err)
			}
			return true
		}
		bound := (targets + replicas - 1) / replicas
		if s.cfg.MaxShards > 0 {
			bound = min(bound, s.cfg.MaxShards)
		}
		s.slots.SetBound(bound)
		return true
	}
	update()
	controller.Every(ctx, renew, update)
}
