package cli

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/datajobs/datajobs/internal/auth"
	"github.com/datajobs/datajobs/internal/graphapi"
	"github.com/datajobs/datajobs/internal/httpapi"
	"github.com/datajobs/datajobs/internal/maintenance"
	"github.com/datajobs/datajobs/internal/server"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/slots"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/synchronizer"
	"github.com/datajobs/datajobs/internal/tracker"
)

// registerServeFlags declares every `datajobs serve` flag, a group a function, each group
// beside the docs that describe it.
func registerServeFlags(f *pflag.FlagSet, fl *serveFlags) {
	cfg := &fl.cfg
	registerCoreFlags(f, fl)
	registerExecutionFlags(f, cfg)
	registerBuildFlags(f, cfg)
	registerRequestFlags(f, fl)
	registerAuthFlags(f, fl)
	registerUIFlags(f, cfg)
	registerSafetyFlags(f, cfg)
	registerSecretsFlags(f, cfg)
	registerNotificationFlags(f, cfg)
}

// registerCoreFlags: the service: listeners, database, cluster, synchronizer, python versions and sources.
func registerCoreFlags(f *pflag.FlagSet, fl *serveFlags) {
	cfg := &fl.cfg
	f.StringVar(&cfg.Listen, "listen", server.DefaultListen, "address the API listens on")
	addDatabaseURL(f, &cfg.DatabaseURL, required)
	f.StringVar(&cfg.DatabaseReadURL, "database-read-url", "", "PostgreSQL streaming replica of the database that serves the jobs lists, GraphQL and the console, never behind a caller's own writes (default: none; its role needs pg_read_all_stats)")
	f.DurationVar(&cfg.DatabaseReadMaxLag, "database-read-max-lag", store.DefaultReadMaxLag, "most the replica of --database-read-url may lag behind the primary and still serve; past it the primary serves")
	addKubeconfig(f, &cfg.Kubeconfig)
	fl.render.register(f, "", ": <registry>/<job>:<version>")
	f.DurationVar(&cfg.ResyncInterval, "resync-interval", 0, "period of the full resync pass (default 5m)")
	f.StringVar(&fl.syncMode, "sync-mode", string(server.DefaultSyncMode), "synchronizer mode: on, dry-run or off")
	f.IntVar(&cfg.SyncWorkers, "sync-workers", synchronizer.DefaultWorkers, "jobs reconciled in parallel")
	f.Var(&throttleFlag{qps: &cfg.KubeQPS}, "kube-qps", "requests per second to the Kubernetes API server: auto (no client-side limit when the apiserver runs API Priority and Fairness, else 50), a number, or -1 for no limit")
	f.Var(&throttleFlag{burst: &cfg.KubeBurst}, "kube-burst", "burst of requests to the Kubernetes API server: auto (twice the QPS) or a number")
	addPythonFlags(f, &cfg.SupportedPythonVersions, &cfg.DefaultPythonVersion, "python versions jobs may deploy with", "python version of deployments that name none")
	f.Int64Var(&cfg.Sources.MaxArchiveBytes, "max-source-archive-bytes", service.DefaultMaxArchiveBytes, "largest job sources zip accepted (413 above)")
	f.Int64Var(&cfg.Sources.MaxUncompressedBytes, "max-source-uncompressed-bytes", service.DefaultMaxUncompressedBytes, "largest total size of the files in a sources zip (400 above: zip bombs)")
	f.IntVar(&cfg.Sources.KeepVersions, "source-versions-kept", service.DefaultKeepVersions, "source versions kept per job (negative: all)")
	f.DurationVar(&cfg.LeaseDuration, "lease-duration", 0, "how long the synchronizer's leader lease lasts without renewal (default 10s)")
	f.IntVar(&cfg.MaxShards, "max-shards", 0, "synchronizer shards (one per execution target) this replica leads at once; one free for a lease duration is taken anyway (0: no bound)")
}

// registerExecutionFlags: executions.
func registerExecutionFlags(f *pflag.FlagSet, cfg *server.Config) {
	f.Int64Var(&cfg.Executions.LogBytes, "execution-log-bytes", tracker.DefaultLogBytes, "bytes of the end of a finished execution's log kept in the database")
	f.IntVar(&cfg.Executions.KeptPerJob, "executions-kept-per-job", maintenance.ExecutionsKeptPerJobDefault, "finished executions kept per job")
	f.DurationVar(&cfg.Executions.MaxAge, "executions-max-age", maintenance.ExecutionsMaxAgeDefault, "finished executions older than this are deleted")
	f.IntVar(&cfg.AuditRetention.AuditKeptPerTeam, "audit-kept-per-team", maintenance.AuditKeptPerTeamDefault, "audit log rows kept per team (newest)")
	f.DurationVar(&cfg.AuditRetention.AuditMaxAge, "audit-max-age", maintenance.AuditMaxAgeDefault, "audit log rows older than this are deleted")
	f.IntVar(&cfg.AuditRetention.RevisionsKeptPerJob, "revisions-kept-per-job", maintenance.RevisionsKeptPerJobDefault, "job revisions kept per job (newest)")
	f.DurationVar(&cfg.AuditRetention.RevisionsMaxAge, "revisions-max-age", maintenance.RevisionsMaxAgeDefault, "job revisions older than this are deleted (never a job's newest)")
	f.DurationVar(&cfg.Executions.StagedSourcesMaxAge, "staged-sources-max-age", maintenance.StagedSourcesMaxAgeDefault, "sources staged for an apply (datajobs apply -f) that no apply took are deleted this long after their staging")
	f.DurationVar(&cfg.Executions.ImagePullGrace, "image-pull-grace", tracker.DefaultImagePullGrace, "how long an execution's image may fail to pull before it is a platform error")
	addMaxExecutionTimeout(f, &cfg.Executions.MaxTimeout)
	f.StringVar(&cfg.Executions.LogsURLTemplate, "logs-url-template", "", "logs_url of executions, with {job_name} {team} {execution_id} {op_id} {start_time} {end_time} (empty: none)")
}

// registerBuildFlags: image builds (docs/builder.md).
func registerBuildFlags(f *pflag.FlagSet, cfg *server.Config) {
	f.StringVar(&cfg.Build.Builder, "builder", "", "image builder: none or layer (default layer when --base-image is set, none otherwise)")
	f.StringSliceVar(&cfg.Build.BaseImages, "base-image", nil, "base image of a python version, <version>=<image> (repeatable)")
	f.IntVar(&cfg.Build.Workers, "build-workers", server.DefaultBuildWorkers, "images built at once")
	f.StringVar(&cfg.Build.RegistryAuthFile, "registry-auth-file", "", "Docker config file with the registries' credentials (default: anonymous)")
	f.BoolVar(&cfg.Build.RegistryInsecure, "registry-insecure", false, "plain HTTP to a registry on a loopback address")
	f.BoolVar(&cfg.Build.VerifyPrebuiltImages, "verify-prebuilt-images", true, "look the image of a job version that is no uploaded sources version up in the registry and run it by digest; a missing image is the deployment's user error (false: run <registry>/<job>:<version> unchecked, e.g. air-gapped)")
	f.StringVar(&cfg.Build.PipIndexURL, "pip-index-url", "", "pip --index-url for requirements.txt (default: pip's own)")
	f.StringSliceVar(&cfg.Build.PipExtraIndexURLs, "pip-extra-index-url", nil, "pip --extra-index-url (repeatable)")
	f.StringSliceVar(&cfg.Build.PipFindLinks, "pip-find-links", nil, "pip --find-links (repeatable)")
	f.DurationVar(&cfg.Build.PipTimeout, "pip-timeout", server.DefaultPipTimeout, "time one pip run may take to resolve and download a build's requirements (a user error above)")
	f.Int64Var(&cfg.Build.PipMemoryBytes, "pip-memory-bytes", server.DefaultPipMemoryBytes, "address space pip may use resolving a build's requirements (RLIMIT_AS; a user error above)")
	f.Int64Var(&cfg.Build.MaxBuildBytes, "max-build-bytes", server.DefaultMaxBuildBytes, "disk one image build may use: pip's downloads and the requirements layer (a user error above)")
}

// registerRequestFlags: request bounds (issue 11): concurrency, deadlines and quotas.
func registerRequestFlags(f *pflag.FlagSet, fl *serveFlags) {
	cfg := &fl.cfg
	f.IntVar(&cfg.Requests.MaxConcurrentUploads, "max-concurrent-uploads", httpapi.DefaultMaxConcurrentUploads, "sources uploads in progress at once; more wait (--admission-wait), then answer 429")
	f.IntVar(&cfg.Requests.MaxConcurrentDownloads, "max-concurrent-downloads", httpapi.DefaultMaxConcurrentDownloads, "sources downloads in progress at once; more wait (--admission-wait), then answer 429")
	f.IntVar(&cfg.Requests.MaxUploadsPerCaller, "max-concurrent-uploads-per-caller", httpapi.DefaultMaxUploadsPerCaller, "sources uploads one caller may have in progress at once; more wait, then answer 429")
	f.IntVar(&cfg.Requests.MaxDownloadsPerCaller, "max-concurrent-downloads-per-caller", httpapi.DefaultMaxDownloadsPerCaller, "sources downloads one caller may have in progress at once; more wait, then answer 429")
	f.IntVar(&cfg.Requests.MaxConcurrentLogReads, "max-concurrent-log-reads", httpapi.DefaultMaxConcurrentLogReads, "execution log reads in progress at once; more wait (--admission-wait), then answer 429")
	f.IntVar(&cfg.Requests.MaxLogReadsPerCaller, "max-concurrent-log-reads-per-caller", httpapi.DefaultMaxLogReadsPerCaller, "execution log reads one caller may have in progress at once; more wait, then answer 429")
	f.IntVar(&cfg.Requests.LogTailLines, "log-tail-lines", httpapi.DefaultLogTailLines, "lines of an execution's log answered when the request sets no tail_lines")
	f.Int64Var(&cfg.Requests.MinTransferRate, "min-transfer-rate", httpapi.DefaultMinTransferRate, "slowest a sources upload or download may go after its first 10 s, in bytes per second (negative: no minimum)")
	f.DurationVar(&cfg.Requests.RequestTimeout, "request-timeout", httpapi.DefaultRequestTimeout, "time to read a request and write its answer")
	f.DurationVar(&cfg.Requests.TransferTimeout, "transfer-timeout", httpapi.DefaultTransferTimeout, "time to read a sources upload or write a download")
	f.IntVar(&cfg.Requests.MaxJobsPerTeam, "max-jobs-per-team", 0, "data jobs a team may have (0: no limit); more answer 409")
	f.IntVar(&cfg.Requests.MaxActiveExecutionsPerTeam, "max-active-executions-per-team", store.DefaultMaxActiveExecutions, "manual executions (starts, re-runs, backfill runs) a team may have submitted or running at once (negative: no limit); a start past it answers 409, a backfill waits")
	f.Int64Var(&cfg.Requests.MaxSourceBytesPerTeam, "max-source-bytes-per-team", 0, "bytes of sources archives stored per team (0: no limit); more answer 409")
	f.DurationVar(&cfg.Requests.GraphQLTimeout, "graphql-timeout", graphapi.DefaultTimeout, "time a GraphQL query may take, parsing and validation included (503 past it)")
	f.BoolVar(&fl.introspection, "graphql-introspection", true, "answer GraphQL introspection queries (__schema, __type)")
	f.IntVar(&cfg.Requests.GraphQLMaxQueryBytes, "graphql-max-query-bytes", graphapi.DefaultMaxQueryBytes, "longest GraphQL document accepted; a longer one is refused before it is parsed")
	f.IntVar(&cfg.Requests.MaxConcurrentGraphQL, "max-concurrent-graphql", graphapi.DefaultMaxConcurrent, "GraphQL queries in progress at once; more wait (--admission-wait), then answer 429")
	f.DurationVar(&cfg.Requests.AdmissionWait, "admission-wait", slots.DefaultWait, "longest a GraphQL query, sources upload or download, or log read waits for a slot when all of its kind are in use (as many may wait as may run); past it, or with that queue full, it answers 429 (negative: at once)")
}

// registerAuthFlags: authentication and authorization (docs/api.md, "Authentication").
func registerAuthFlags(f *pflag.FlagSet, fl *serveFlags) {
	cfg := &fl.cfg
	f.StringVar(&fl.authMode, "auth-mode", string(server.AuthOIDC), "how callers are authenticated: oidc (a bearer JWT on every /data-jobs/ request) or none (everyone is an admin: a trusted loopback only)")
	f.StringSliceVar(&cfg.Auth.OIDC.IssuerURLs, "oidc-issuer-url", nil, "trusted OIDC issuer URLs, repeatable or comma-separated (required in mode oidc)")
	f.StringVar(&cfg.Auth.OIDC.Audience, "oidc-audience", auth.DefaultAudience, "audience a token must carry")
	f.StringVar(&cfg.Auth.OIDC.UsernameClaim, "oidc-username-claim", auth.DefaultUsernameClaim, "token claim recorded as deployed_by and started_by")
	f.StringVar(&cfg.Auth.OIDC.TeamsClaim, "oidc-teams-claim", auth.DefaultTeamsClaim, "token claim listing the caller's teams (a list: each element one team; or a string)")
	f.StringVar(&cfg.Auth.OIDC.TeamsSeparator, "oidc-teams-claim-separator", "", "separator that splits a string teams claim into teams (default: a string claim is one team; a list is never split)")
	f.StringSliceVar(&cfg.Auth.OIDC.AdminTeams, "admin-teams", nil, "teams whose members may act on every team")
	f.StringVar(&cfg.Auth.WebhookURL, "authz-webhook-url", "", "authorization webhook asked about every authenticated request (fail closed)")
	f.DurationVar(&cfg.Auth.WebhookTimeout, "authz-webhook-timeout", auth.DefaultWebhookTimeout, "timeout of one webhook call (503 after it)")
	f.DurationVar(&cfg.Auth.WebhookCacheTTL, "authz-webhook-cache-ttl", auth.DefaultWebhookCacheTTL, "how long a webhook decision is reused")
	f.BoolVar(&cfg.Auth.JobTokenTeamExecutions, "job-token-team-executions", false, "let a running job's token start, list and read the executions of its own team's jobs (what VDK's vdk-dag plugin sends; off: a job's token reaches only its own job)")
	f.StringVar(&cfg.AdminListen, "admin-listen", server.DefaultAdminListen, "address of /metrics and /data-jobs/debug/* (keep it private)")
	f.BoolVar(&cfg.AdminProfiling, "admin-profiling", false, "also serve Go's profiles (/debug/pprof/) on the admin listener")
}

// registerUIFlags: web console at /ui/ (issue 14, docs/ui.md).
func registerUIFlags(f *pflag.FlagSet, cfg *server.Config) {
	f.BoolVar(&cfg.UI.Disabled, "ui-disabled", false, "do not serve the web console at /ui/")
	f.StringVar(&cfg.UI.OIDCClientID, "ui-oidc-client-id", "", "OAuth2 client of the web console at the issuer (auth mode oidc: the console is off without it)")
	f.StringVar(&cfg.UI.OIDCClientSecret, "ui-oidc-client-secret", "", "secret of that client (empty: a public client; the flow uses PKCE either way)")
	f.StringVar(&cfg.UI.OIDCIssuerURL, "ui-oidc-issuer-url", "", "issuer the console signs people in with (default: the first --oidc-issuer-url)")
	f.StringSliceVar(&cfg.UI.OIDCScopes, "ui-oidc-scopes", auth.DefaultScopes(), "scopes the console asks for at sign-in")
	f.StringVar(&cfg.UI.PublicURL, "ui-public-url", "", "external base URL of the console, e.g. https://datajobs.example.com (required with --ui-oidc-client-id: the sign-in redirect is made from it, never from the request's Host)")
	f.StringVar(&cfg.UI.SessionKey, "ui-session-key", "", "secret sealing the console's session cookies, the same on every replica (default: random per process; use the environment variable)")
}

// registerSafetyFlags: synchronizer safety (issue 11): the mass-prune guard and the configuration fingerprint.
func registerSafetyFlags(f *pflag.FlagSet, cfg *server.Config) {
	addGuardFlags(f, &cfg.Safety, "--sync-mode dry-run")
	f.Int32Var(&cfg.Safety.DBMaxConns, "db-max-conns", 0, fmt.Sprintf("connections of the main database pool (API and synchronizer; default: the URL's pool_max_conns, else %d); the leader lease and LISTEN have their own", server.DefaultDBMaxConns))
	f.DurationVar(&cfg.Safety.DBStatementTimeout, "db-statement-timeout", server.DefaultDBStatementTimeout, "longest a database statement of the main pool may run")
	f.BoolVar(&cfg.NotificationWebhookAllowPrivate, "notification-webhook-allow-private", false, "let notification webhooks reach loopback, link-local and private addresses (refused by default, checked when each connection is made: a team's webhook must not reach the installation's own network)")
}
