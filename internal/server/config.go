// Package server is the composition root of datajobs: it builds the store, the API, the
// synchronizer and the leader elector from one Config, runs them, and shuts them down.
package server

import (
	"cmp"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/leader"
	"github.com/datajobs/datajobs/internal/maintenance"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/synchronizer"
)

// SyncMode says what the synchronizer does with its plan.
type SyncMode string

// The synchronizer modes.
const (
	SyncOn     SyncMode = "on"      // apply the plan
	SyncDryRun SyncMode = "dry-run" // compute and log the plan, write nothing
	SyncOff    SyncMode = "off"     // no synchronizer in this process
)

// The defaults of Config, which the flags of `datajobs serve` (and of the other commands
// that take the same flag) use too. The defaults of the components' own settings are
// the components' (synchronizer.DefaultWorkers, httpapi.Limits, ...).
const (
	DefaultListen              = ":8092"
	DefaultAdminListen         = "127.0.0.1:8093"
	DefaultNamespace           = "datajobs"
	DefaultImageRegistry       = "registry.local/datajobs"
	DefaultSyncMode            = SyncOn
	DefaultShutdownTimeout     = 20 * time.Second
	DefaultMaxExecutionTimeout = 24 * time.Hour
	DefaultDBStatementTimeout  = 30 * time.Second
	DefaultBuildWorkers        = 2
	// DefaultDBMaxConns is the main pool's size unless the flag or the URL's
	// pool_max_conns says otherwise: pgx's own (the larger of 4 and the CPUs) made every
	// statement wait for a connection on 2 CPUs at 100 trigger starts a second beside the
	// tracker's writes (bench/triggers -db-max-conns 4: waits p50 150-180 ms, the firer's
	// part p99 1.5 s; none at 16).
	DefaultDBMaxConns = 16
)

// Config is everything `datajobs serve` needs. Each field is a flag and an environment
// variable DATAJOBS_<FLAG_IN_UPPER_SNAKE> (see internal/cli).
type Config struct {
	// Listen is the API address (default ":8092").
	Listen string
	// DatabaseURL is the PostgreSQL connection URL. Required.
	DatabaseURL string
	// DatabaseReadURL, when set, is a streaming replica of DatabaseURL's database that
	// serves the jobs lists, GraphQL and the console, never behind a caller's own writes
	// (internal/replicaread). Default: none.
	DatabaseReadURL string
	// DatabaseReadMaxLag is the most the replica may lag and still serve (default
	// store.DefaultReadMaxLag).
	DatabaseReadMaxLag time.Duration
	// Kubeconfig is the kubeconfig path; empty means $KUBECONFIG, then in-cluster config.
	Kubeconfig string
	// Namespace is where the CronJobs live (default "datajobs"): the default execution
	// target's namespace.
	Namespace string
	// SyncTarget is the execution target whose shard `sync --once` passes over (default:
	// the default target).
	SyncTarget string
	// MaxShards bounds the synchronizer shards (one per execution target) this replica
	// leads at once, softly: a shard nobody with room took for a lease duration is taken
	// anyway (leader.Slots; default 0: no bound).
	MaxShards int
	// ImageRegistry prefixes job images: <registry>/<job>:<version> (default "registry.local/datajobs").
	ImageRegistry string
	// ResyncInterval is the period of the full resync pass (default 5m).
	ResyncInterval time.Duration
	// SyncMode is on, dry-run or off (default on).
	SyncMode SyncMode
	// SyncChangeRetention is how long the synchronizer's change log keeps a change, in
	// every sync mode, before any replica deletes it (default 10m; it keeps between one and
	// two of them). A reader that has not read for that long reads every state instead.
	SyncChangeRetention time.Duration
	// SyncWorkers is the number of jobs reconciled in parallel (default
	// synchronizer.DefaultWorkers, 16: a busy apiserver
	// answers each write slower, and more in flight kept a failover under a CPU hog
	// within lease + 3 s, docs/benchmarks.md).
	SyncWorkers int
	// KubeQPS and KubeBurst bound the client's request rate to the apiserver. Zero QPS
	// (the default) is automatic: no limit under API Priority and Fairness, else 50/100;
	// negative disables the limit; zero burst is twice the QPS (see kube.ClusterConfig).
	KubeQPS   float32
	KubeBurst int
	// SupportedPythonVersions are the python versions jobs may deploy with (default
	// job.DefaultSupportedPythonVersions: 3.9-3.12); with the layer builder, only those
	// of them with a base image (BuildConfig.BaseImages).
	SupportedPythonVersions []string
	// DefaultPythonVersion is used when a deployment names none (default
	// job.DefaultPythonVersion: 3.11).
	DefaultPythonVersion string
	// Resources are the default and maximum job resources (zero fields: job.DefaultResources).
	Resources job.ResourceBounds
	// JobEphemeralStorageBytes is the ephemeral-storage limit of every job container
	// (default kube.DefaultEphemeralStorageLimitBytes, 2 GiB).
	JobEphemeralStorageBytes int64
	// JobAPIURL is the API's URL as job pods reach it, given to them as
	// VDK_CONTROL_SERVICE_REST_API_URL (default none: jobs are not told).
	JobAPIURL string
	// JobServiceAccount is the job pods' ServiceAccount, whose projected token is the
	// job's identity (default kube.DefaultJobServiceAccount).
	JobServiceAccount string
	// JobServiceAccountTemplate names a team's job pods' ServiceAccount, {team} replaced
	// (default job.DefaultServiceAccountTemplate; docs/profiles.md).
	JobServiceAccountTemplate string
	// Sources bounds uploaded job sources (defaults: 50 MiB archives, 200 MiB
	// uncompressed, 10,000 files, 50 versions kept per job).
	Sources service.SourcesConfig
	// Requests bounds requests: concurrency, deadlines, quotas (see RequestLimits).
	Requests RequestLimits
	// Executions configures how executions are tracked and kept.
	Executions ExecutionsConfig
	// AuditRetention bounds the audit log and the revisions kept (issue 41, M1; zero
	// fields take maintenance's defaults; its Logger defaults to Logger).
	AuditRetention maintenance.AuditRetentionConfig
	// LeaseDuration is how long a leader holds the lease without renewing (default 10s).
	LeaseDuration time.Duration
	// ShutdownTimeout bounds graceful shutdown (default 20s).
	ShutdownTimeout time.Duration
	// Build configures the image builder (build.go, docs/builder.md).
	Build BuildConfig
	// Safety holds the synchronizer's guards against mistakes (issue 11).
	Safety SafetyConfig
	// Version is reported by /data-jobs/for-team/{team}/info.
	Version string
	// Logger receives every log line (default slog.Default()).
	Logger *slog.Logger

	// Auth is who may call the API (default: mode oidc, which needs issuers).
	Auth AuthConfig
	// AdminListen is the address of /metrics and /data-jobs/debug/*, kept off the public
	// port (default "127.0.0.1:8093").
	AdminListen string
	// AdminProfiling also serves Go's profiles at /debug/pprof/ on the admin listener
	// (off by default: a CPU profile or trace costs the process while it runs).
	AdminProfiling bool
	// AdminReady, when not nil, receives the admin listener's address once it accepts.
	AdminReady chan<- net.Addr

	// UI is the web console at /ui/ (ui.go, docs/ui.md).
	UI UIConfig

	// NotificationWebhookAllowPrivate lets notification webhooks (a team's, created through
	// the API, and the sender's connections) reach loopback, link-local and private
	// addresses (default false: refused; `datajobs dev` sets it).
	NotificationWebhookAllowPrivate bool
	// Secrets configures job secrets and team OAuth credentials (secrets.go).
	Secrets SecretsConfig

	// Notifications configures e-mail delivery of the notifications outbox (notify.go,
	// docs/notifications.md).
	Notifications NotificationsConfig
}

// SafetyConfig holds the synchronizer's guards against a wrong database or configuration.
type SafetyConfig struct {
	// PruneMaxFraction is the largest share of this installation's CronJobs that one pass
	// deletes as orphans (default synchronizer.DefaultPruneMaxFraction, 0.2).
	PruneMaxFraction float64
	// AllowMassPrune lifts the PruneMaxFraction guard (default false).
	AllowMassPrune bool
	// DBMaxConns caps the main database pool, shared by the API and the synchronizer's
	// reads and writes (default 0: the URL's pool_max_conns, else DefaultDBMaxConns). The
	// leader lease and LISTEN have connections of their own on top.
	DBMaxConns int32
	// DBStatementTimeout bounds every statement of the main pool (default 30s), so a
	// runaway query frees its connection.
	DBStatementTimeout time.Duration
	// AcceptConfigChange lets the synchronizer sync with a rendering configuration that
	// differs from the previous leader's (default false: it refuses and says so).
	AcceptConfigChange bool
	// AcceptRestore lifts the restore guard: the synchronizer syncs although live CronJobs
	// are newer than the database (default false: it writes nothing and says so).
	AcceptRestore bool
}

// withDefaults fills every unset field and validates the result.
func (c Config) withDefaults() (_ Config, err error) {
	c.Listen = cmp.Or(c.Listen, DefaultListen)
	c.Namespace = cmp.Or(c.Namespace, DefaultNamespace)
	c.ImageRegistry = cmp.Or(c.ImageRegistry, DefaultImageRegistry)
	c.ResyncInterval = cmp.Or(c.ResyncInterval, synchronizer.DefaultResyncInterval)
	c.SyncMode = cmp.Or(c.SyncMode, DefaultSyncMode)
	c.SyncWorkers = cmp.Or(c.SyncWorkers, synchronizer.DefaultWorkers)
	if len(c.SupportedPythonVersions) == 0 {
		c.SupportedPythonVersions = job.DefaultSupportedPythonVersions()
	}
	c.DefaultPythonVersion = cmp.Or(c.DefaultPythonVersion, job.DefaultPythonVersion)
	c.Resources = c.Resources.WithDefaults()
	c.LeaseDuration = cmp.Or(c.LeaseDuration, leader.DefaultLeaseDuration)
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, DefaultShutdownTimeout)
	c.Executions.MaxTimeout = cmp.Or(c.Executions.MaxTimeout, DefaultMaxExecutionTimeout)
	c.Version = cmp.Or(c.Version, "dev")
	c.Safety.DBStatementTimeout = cmp.Or(c.Safety.DBStatementTimeout, DefaultDBStatementTimeout)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.Auth.Mode = cmp.Or(c.Auth.Mode, AuthOIDC)
	c.AdminListen = cmp.Or(c.AdminListen, DefaultAdminListen)

	if c.Build, err = c.Build.withDefaults(); err != nil {
		return c, err
	}
	if c.SupportedPythonVersions, err = runnablePythonVersions(c.Build, c.SupportedPythonVersions, c.DefaultPythonVersion); err != nil {
		return c, err
	}
	switch {
	case c.DatabaseURL == "":
		return c, fmt.Errorf("the database url is required (--database-url or DATAJOBS_DATABASE_URL)")
	case !slices.Contains([]SyncMode{SyncOn, SyncDryRun, SyncOff}, c.SyncMode):
		return c, fmt.Errorf("sync mode %q: must be on, dry-run or off", c.SyncMode)
	case !slices.Contains(c.SupportedPythonVersions, c.DefaultPythonVersion):
		return c, fmt.Errorf("default python version %q is not among the supported versions %v", c.DefaultPythonVersion, c.SupportedPythonVersions)
	case c.JobAPIURL != "" && !strings.HasPrefix(c.JobAPIURL, "http://") && !strings.HasPrefix(c.JobAPIURL, "https://"):
		return c, fmt.Errorf("job api url %q: must be an http(s) URL (--job-api-url)", c.JobAPIURL)
	case c.SyncWorkers < 1:
		return c, fmt.Errorf("sync workers must be at least 1, not %d", c.SyncWorkers)
	}
	return c, nil
}
