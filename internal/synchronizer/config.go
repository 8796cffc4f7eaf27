package synchronizer

import (
	"cmp"
	"time"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/secrets"
)

// The defaults of Config, which the flags of `datajobs serve` and `sync --once` use too.
const (
	DefaultWorkers          = 16
	DefaultPruneMaxFraction = 0.2
	DefaultResyncInterval   = 5 * time.Minute
	// DefaultPlacementGrace is Config.PlacementGrace's default: 24 hours, the longest
	// activeDeadlineSeconds a deployment may set by default (serve's
	// --max-execution-timeout), plus 30 minutes (the CronJobs' default starting deadline,
	// job.DefaultStartingDeadlineSeconds) for the CronJobs still to be re-rendered and
	// the Job controller to start the Jobs made meanwhile.
	DefaultPlacementGrace = 24*time.Hour + placementGraceMargin
	placementGraceMargin  = time.Duration(job.DefaultStartingDeadlineSeconds) * time.Second
)

// PlacementGraceFor is the PlacementGrace of an installation whose longest run is
// maxTimeout (serve's --max-execution-timeout): DefaultPlacementGrace's rule for it.
func PlacementGraceFor(maxTimeout time.Duration) time.Duration {
	return maxTimeout + placementGraceMargin
}

// Config configures a Synchronizer.
type Config struct {
	// Target is the execution target whose shard this synchronizer is (default: the
	// default target): its lease records the rendering configuration (checkConfig), and
	// its Store is that target's view (store.TargetView).
	Target string
	// Render is the platform-wide part of every CronJob; Render.Namespace is watched.
	// Render.Installation, when empty, is read from the database at the start of a term.
	Render kube.RenderConfig
	// PruneMaxFraction is the largest share of this installation's CronJobs that one pass
	// deletes as orphans (CronJobs no row of the database knows); a pass that would delete
	// more, or any orphan at all while the database holds no job, deletes none of them
	// (default 0.2). Deletes the database asked for are never held back.
	PruneMaxFraction float64
	// AllowMassPrune lifts the PruneMaxFraction guard, for an operator who means it.
	AllowMassPrune bool
	// AcceptConfigChange lets a leader whose rendering configuration (Render's
	// Fingerprint) differs from the one the previous leader synced with sync, and makes
	// its own the one recorded. Without it such a leader refuses to sync, so that two
	// replicas (or a sync --once) with different flags never flip the CronJobs back and forth.
	AcceptConfigChange bool
	// AcceptRestore lifts the restore guard (restore.go): the database is taken as it is
	// although live CronJobs are newer than it, and the next pass re-stamps them.
	AcceptRestore bool
	// Settings are the loop's: Workers reconcile that many jobs in parallel (default 16);
	// Interval is the period of the full pass that catches anything missed (default 5m);
	// Now is the clock of every time the synchronizer writes or decides by (the deployed
	// date of an applied CronJob, when a refusal was made, build backoffs; default
	// time.Now); Logger receives the synchronizer's logs (default slog.Default()).
	controller.Settings
	// PrefetchLimit bounds the states a full pass keeps for the creates it queued
	// (prefetch.go; default 10,000): the in-flight objects of the queue.
	PrefetchLimit int
	// FullReadInterval is how often a term's pass reads every row of the database instead
	// of the rows changed since its previous pass (passstate.go; default 1h).
	FullReadInterval time.Duration
	// DryRun computes and logs the plan but writes nothing, to Kubernetes or the database.
	DryRun bool
	// StepDownAfter ends the term (Run returns ErrAPIServerUnreachable) when the apiserver
	// has not answered for that long (default 0: never; serve sets the lease duration).
	StepDownAfter time.Duration
	// RetryBase and RetryMax bound the per-job exponential backoff of failed applies
	// (default 500ms and 5m).
	RetryBase, RetryMax time.Duration
	// Metrics records telemetry (default: metrics registered nowhere).
	Metrics *Metrics
	// Build is the image build stage (build.go); its zero value builds nothing.
	Build BuildConfig
	// RecordBatch bounds the batches in which a term records the CronJobs Kubernetes
	// confirmed (record.go; default 500). They are group commits: a row is written at once
	// when no write is in flight, with the rows that arrived during the previous one otherwise.
	RecordBatch int
	// PlacementGrace is how long a placement that leaves a team's profiles stays admitted
	// by the chart's -team-nodes policy (placements.go): long enough for every Job made
	// before the change, whose pods keep the old placement, to end. It must be at least
	// the longest timeout_seconds a deployment may set plus the starting deadline
	// (default DefaultPlacementGrace, for the default --max-execution-timeout of 24h; an
	// installation that allows longer runs sets more). Negative: none, the ConfigMap is
	// the exact projection of the profiles.
	PlacementGrace time.Duration
	// TeamOAuthKeys opens the teams' OAuth client secrets (the keyring of
	// --secrets-key-file) for the Secrets their job pods read (teamsecret.go). Nil: no
	// team Secret is written or deleted (CronJobs of teams with credentials still refer
	// to theirs).
	TeamOAuthKeys *secrets.Keyring
}

func (c Config) withDefaults() Config {
	c.Render = c.Render.WithDefaults()
	c.Settings = c.WithDefaults(DefaultWorkers, DefaultResyncInterval)
	c.PruneMaxFraction = cmp.Or(c.PruneMaxFraction, DefaultPruneMaxFraction)
	c.FullReadInterval = cmp.Or(c.FullReadInterval, time.Hour)
	c.PrefetchLimit = cmp.Or(c.PrefetchLimit, 10000)
	c.RetryBase = cmp.Or(c.RetryBase, 500*time.Millisecond)
	c.RetryMax = cmp.Or(c.RetryMax, 5*time.Minute)
	c.RecordBatch = cmp.Or(c.RecordBatch, 500)
	c.PlacementGrace = cmp.Or(c.PlacementGrace, DefaultPlacementGrace)
	if c.Metrics == nil {
		c.Metrics = NewMetrics(nil)
	}
	return c
}
