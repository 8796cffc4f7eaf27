package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/server"
	"github.com/spf13/cobra"
)

// ServeFunc runs `serve` in-process against the given database and kubeconfig, with the
// other settings at their flag values. `datajobs dev` uses it.
type ServeFunc func(ctx context.Context, databaseURL, kubeconfig string, out io.Writer) error

type serveCommand struct {
	command *cobra.Command
	run     ServeFunc
}

func newServeCommand(g *globals) serveCommand {
	var cfg server.Config
	var syncMode string
	var res resourceFlags
	var introspection bool
	var authMode string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the API and run the synchronizer",
		Args:  cobra.NoArgs,
	}
	build := func() (server.Config, error) {
		log, err := g.logger()
		if err != nil {
			return cfg, err
		}
		c := cfg
		c.SyncMode = server.SyncMode(syncMode)
		c.Requests.DisableGraphQLIntrospection = !introspection
		c.Auth.Mode = server.AuthMode(authMode)
		c.Logger = log
		c.Version = Version
		c.Resources, err = res.bounds()
		return c, err
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := build()
		if err != nil {
			return err
		}
		return server.Run(cmd.Context(), c, nil)
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Listen, "listen", ":8092", "address the API listens on")
	f.StringVar(&cfg.DatabaseURL, "database-url", "", "PostgreSQL connection URL (required)")
	f.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "kubeconfig path (default: $KUBECONFIG, then the in-cluster config)")
	f.StringVar(&cfg.Namespace, "namespace", "datajobs", "namespace of the CronJobs")
	f.StringVar(&cfg.ImageRegistry, "image-registry", "registry.local/datajobs", "registry of job images: <registry>/<job>:<version>")
	f.DurationVar(&cfg.ResyncInterval, "resync-interval", 0, "period of the full resync pass (default 5m)")
	f.StringVar(&syncMode, "sync-mode", "on", "synchronizer mode: on, dry-run or off")
	f.IntVar(&cfg.SyncWorkers, "sync-workers", 8, "jobs reconciled in parallel")
	f.Var(&throttleFlag{qps: &cfg.KubeQPS}, "kube-qps", "requests per second to the Kubernetes API server: auto (no client-side limit when the apiserver runs API Priority and Fairness, else 50), a number, or -1 for no limit")
	f.Var(&throttleFlag{burst: &cfg.KubeBurst}, "kube-burst", "burst of requests to the Kubernetes API server: auto (twice the QPS) or a number")
	f.StringSliceVar(&cfg.SupportedPythonVersions, "supported-python-versions", job.DefaultSupportedPythonVersions(), "python versions jobs may deploy with")
	f.StringVar(&cfg.DefaultPythonVersion, "default-python-version", job.DefaultPythonVersion, "python version of deployments that name none")
	f.Int64Var(&cfg.Sources.MaxArchiveBytes, "max-source-archive-bytes", 50<<20, "largest job sources zip accepted (413 above)")
	f.Int64Var(&cfg.Sources.MaxUncompressedBytes, "max-source-uncompressed-bytes", 200<<20, "largest total size of the files in a sources zip (400 above: zip bombs)")
	f.IntVar(&cfg.Sources.KeepVersions, "source-versions-kept", 50, "source versions kept per job (negative: all)")
	f.DurationVar(&cfg.LeaseDuration, "lease-duration", 0, "how long the synchronizer's leader lease lasts without renewal (default 10s)")
	res.register(f)
	// Executions.
	f.Int64Var(&cfg.Executions.LogBytes, "execution-log-bytes", 256<<10, "bytes of the end of a finished execution's log kept in the database")
	f.IntVar(&cfg.Executions.KeptPerJob, "executions-kept-per-job", 100, "finished executions kept per job")
	f.DurationVar(&cfg.Executions.MaxAge, "executions-max-age", 14*24*time.Hour, "finished executions older than this are deleted")
	f.DurationVar(&cfg.Executions.ImagePullGrace, "image-pull-grace", 5*time.Minute, "how long an execution's image may fail to pull before it is a platform error")
	f.StringVar(&cfg.Executions.LogsURLTemplate, "logs-url-template", "", "logs_url of executions, with {job_name} {team} {execution_id} {op_id} {start_time} {end_time} (empty: none)")
	// Image builds (docs/builder.md).
	f.StringVar(&cfg.Build.Builder, "builder", "", "image builder: none or layer (default layer when --base-image is set, none otherwise)")
	f.StringSliceVar(&cfg.Build.BaseImages, "base-image", nil, "base image of a python version, <version>=<image> (repeatable)")
	f.IntVar(&cfg.Build.Workers, "build-workers", 2, "images built at once")
	f.StringVar(&cfg.Build.RegistryAuthFile, "registry-auth-file", "", "Docker config file with the registries' credentials (default: anonymous)")
	f.BoolVar(&cfg.Build.RegistryInsecure, "registry-insecure", false, "plain HTTP to a registry on a loopback address")
	f.StringVar(&cfg.Build.PipIndexURL, "pip-index-url", "", "pip --index-url for requirements.txt (default: pip's own)")
	f.StringSliceVar(&cfg.Build.PipExtraIndexURLs, "pip-extra-index-url", nil, "pip --extra-index-url (repeatable)")
	f.StringSliceVar(&cfg.Build.PipFindLinks, "pip-find-links", nil, "pip --find-links (repeatable)")

	// Request bounds (issue 11): concurrency, deadlines and quotas.
	f.IntVar(&cfg.Requests.MaxConcurrentUploads, "max-concurrent-uploads", 4, "sources uploads in progress at once; more answer 429")
	f.IntVar(&cfg.Requests.MaxConcurrentDownloads, "max-concurrent-downloads", 16, "sources downloads in progress at once; more answer 429")
	f.DurationVar(&cfg.Requests.RequestTimeout, "request-timeout", time.Minute, "time to read a request and write its answer")
	f.DurationVar(&cfg.Requests.TransferTimeout, "transfer-timeout", 5*time.Minute, "time to read a sources upload or write a download")
	f.IntVar(&cfg.Requests.MaxJobsPerTeam, "max-jobs-per-team", 0, "data jobs a team may have (0: no limit); more answer 409")
	f.Int64Var(&cfg.Requests.MaxSourceBytesPerTeam, "max-source-bytes-per-team", 0, "bytes of sources archives stored per team (0: no limit); more answer 409")
	f.DurationVar(&cfg.Requests.GraphQLTimeout, "graphql-timeout", 10*time.Second, "time a GraphQL query may take (503 past it)")
	f.BoolVar(&introspection, "graphql-introspection", true, "answer GraphQL introspection queries (__schema, __type)")
	// Authentication and authorization (docs/api.md, "Authentication").
	f.StringVar(&authMode, "auth-mode", "oidc", "how callers are authenticated: oidc (a bearer JWT on every /data-jobs/ request) or none (everyone is an admin: a trusted loopback only)")
	f.StringSliceVar(&cfg.Auth.OIDC.IssuerURLs, "oidc-issuer-url", nil, "trusted OIDC issuer URLs, repeatable or comma-separated (required in mode oidc)")
	f.StringVar(&cfg.Auth.OIDC.Audience, "oidc-audience", "datajobs", "audience a token must carry")
	f.StringVar(&cfg.Auth.OIDC.UsernameClaim, "oidc-username-claim", "sub", "token claim recorded as deployed_by and started_by")
	f.StringVar(&cfg.Auth.OIDC.TeamsClaim, "oidc-teams-claim", "groups", "token claim listing the caller's teams (a string or a list)")
	f.StringSliceVar(&cfg.Auth.OIDC.AdminTeams, "admin-teams", nil, "teams whose members may act on every team")
	f.StringVar(&cfg.Auth.WebhookURL, "authz-webhook-url", "", "authorization webhook asked about every authenticated request (fail closed)")
	f.DurationVar(&cfg.Auth.WebhookTimeout, "authz-webhook-timeout", 5*time.Second, "timeout of one webhook call (503 after it)")
	f.DurationVar(&cfg.Auth.WebhookCacheTTL, "authz-webhook-cache-ttl", 10*time.Second, "how long a webhook decision is reused")
	f.StringVar(&cfg.AdminListen, "admin-listen", "127.0.0.1:8093", "address of /metrics and /data-jobs/debug/* (keep it private)")
	// Web console at /ui/ (issue 14, docs/ui.md).
	f.BoolVar(&cfg.UI.Disabled, "ui-disabled", false, "do not serve the web console at /ui/")
	f.StringVar(&cfg.UI.OIDCClientID, "ui-oidc-client-id", "", "OAuth2 client of the web console at the issuer (auth mode oidc: the console is off without it)")
	f.StringVar(&cfg.UI.OIDCClientSecret, "ui-oidc-client-secret", "", "secret of that client (empty: a public client; the flow uses PKCE either way)")
	f.StringVar(&cfg.UI.OIDCIssuerURL, "ui-oidc-issuer-url", "", "issuer the console signs people in with (default: the first --oidc-issuer-url)")
	f.StringSliceVar(&cfg.UI.OIDCScopes, "ui-oidc-scopes", []string{"openid"}, "scopes the console asks for at sign-in")
	f.StringVar(&cfg.UI.PublicURL, "ui-public-url", "", "external base URL of the console, e.g. https://datajobs.example.com (default: from each request)")
	f.StringVar(&cfg.UI.SessionKey, "ui-session-key", "", "secret sealing the console's session cookies, the same on every replica (default: random per process; use the environment variable)")
	// Synchronizer safety (issue 11): the mass-prune guard and the configuration fingerprint.
	f.Float64Var(&cfg.Safety.PruneMaxFraction, "prune-max-fraction", 0.2, "largest share of this installation's CronJobs one pass deletes as orphans (no data job knows them); above it, and on a database without any job, none is deleted")
	f.BoolVar(&cfg.Safety.AllowMassPrune, "allow-mass-prune", false, "lift the --prune-max-fraction guard: delete every orphaned CronJob of this installation, however many")
	f.Int32Var(&cfg.Safety.DBMaxConns, "db-max-conns", 0, "connections of the main database pool (API and synchronizer; default: the larger of 4 and the number of CPUs); the leader lease and LISTEN have their own")
	f.DurationVar(&cfg.Safety.DBStatementTimeout, "db-statement-timeout", 30*time.Second, "longest a database statement of the main pool may run")
	f.BoolVar(&cfg.Safety.AcceptConfigChange, "accept-config-change", false, "sync although the rendering configuration (namespace, image registry, resource defaults) differs from the one the previous leader synced with, and make it the recorded one")

	return serveCommand{command: cmd, run: func(ctx context.Context, databaseURL, kubeconfig string, out io.Writer) error {
		c, err := build()
		if err != nil {
			return err
		}
		c.DatabaseURL, c.Kubeconfig = databaseURL, kubeconfig
		c = withDevImages(ctx, c)
		// dev serves on loopback only, without login (auth mode none).
		c.Listen, c.Auth.Mode = "127.0.0.1:8092", server.AuthNone
		cluster, err := kube.Connect(ctx, kube.ClusterConfig{Kubeconfig: kubeconfig})
		if err != nil {
			return err
		}
		if err := cluster.EnsureNamespace(ctx, c.Namespace); err != nil {
			return err
		}
		// The printer is waited for: it ends with the address or when Run returns.
		ready := make(chan net.Addr, 1)
		var wg sync.WaitGroup
		defer wg.Wait()
		printing, stop := context.WithCancel(ctx)
		defer stop()
		wg.Go(func() {
			select {
			case addr := <-ready:
				fmt.Fprintf(out, "datajobs API: http://%s\n", localURL(addr))
			case <-printing.Done():
			}
		})
		return server.Run(ctx, c, ready)
	}}
}

// localURL turns a wildcard listen address into one a user can paste.
func localURL(addr net.Addr) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || tcp.IP.IsUnspecified() {
		if ok {
			return fmt.Sprintf("localhost:%d", tcp.Port)
		}
	}
	return addr.String()
}

// resourceFlags are the default and maximum job resources, as Kubernetes quantities.
type resourceFlags struct {
	cpuRequest, cpuLimit, memRequest, memLimit string
	maxCPU, maxMemory                          string
}

func (r *resourceFlags) register(f interface {
	StringVar(p *string, name, value, usage string)
},
) {
	d, m := job.DefaultResources.Default, job.DefaultResources.Max
	f.StringVar(&r.cpuRequest, "default-cpu-request", job.CPUQuantity(d.CPURequestMillis), "CPU request of deployments that set none")
	f.StringVar(&r.cpuLimit, "default-cpu-limit", job.CPUQuantity(d.CPULimitMillis), "CPU limit of deployments that set none")
	f.StringVar(&r.memRequest, "default-memory-request", job.MemoryQuantity(d.MemoryRequestBytes), "memory request of deployments that set none")
	f.StringVar(&r.memLimit, "default-memory-limit", job.MemoryQuantity(d.MemoryLimitBytes), "memory limit of deployments that set none")
	f.StringVar(&r.maxCPU, "max-cpu", job.CPUQuantity(m.CPULimitMillis), "largest CPU request or limit a deployment may set")
	f.StringVar(&r.maxMemory, "max-memory", job.MemoryQuantity(m.MemoryLimitBytes), "largest memory request or limit a deployment may set")
}

func (r *resourceFlags) bounds() (b job.ResourceBounds, err error) {
	parse := func(flag, s string, cpu bool) int64 {
		if err != nil {
			return 0
		}
		v, perr := job.MemoryFromQuantity(flag, s)
		if cpu {
			v, perr = job.CPUFromQuantity(flag, s)
		}
		if perr != nil || v <= 0 {
			err = fmt.Errorf("--%s %q: must be a positive Kubernetes quantity", flag, s)
		}
		return v
	}
	b.Default.CPURequestMillis = parse("default-cpu-request", r.cpuRequest, true)
	b.Default.CPULimitMillis = parse("default-cpu-limit", r.cpuLimit, true)
	b.Default.MemoryRequestBytes = parse("default-memory-request", r.memRequest, false)
	b.Default.MemoryLimitBytes = parse("default-memory-limit", r.memLimit, false)
	b.Max.CPURequestMillis = parse("max-cpu", r.maxCPU, true)
	b.Max.CPULimitMillis = b.Max.CPURequestMillis
	b.Max.MemoryRequestBytes = parse("max-memory", r.maxMemory, false)
	b.Max.MemoryLimitBytes = b.Max.MemoryRequestBytes
	return b, err
}
