package cli

import (
	"context"
	"fmt"
	"io"
	"net"
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
	f.Float32Var(&cfg.KubeQPS, "kube-qps", 50, "requests per second to the Kubernetes API server")
	f.IntVar(&cfg.KubeBurst, "kube-burst", 100, "burst of requests to the Kubernetes API server")
	f.StringSliceVar(&cfg.SupportedPythonVersions, "supported-python-versions", []string{"3.9", "3.10", "3.11", "3.12"}, "python versions jobs may deploy with")
	f.StringVar(&cfg.DefaultPythonVersion, "default-python-version", "3.11", "python version of deployments that name none")
	f.Int64Var(&cfg.Sources.MaxArchiveBytes, "max-source-archive-bytes", 50<<20, "largest job sources zip accepted (413 above)")
	f.Int64Var(&cfg.Sources.MaxUncompressedBytes, "max-source-uncompressed-bytes", 200<<20, "largest total size of the files in a sources zip (400 above: zip bombs)")
	f.IntVar(&cfg.Sources.KeepVersions, "source-versions-kept", 50, "source versions kept per job (negative: all)")
	f.DurationVar(&cfg.LeaseDuration, "lease-duration", 0, "how long the synchronizer's leader lease lasts without renewal (default 10s)")
	res.register(f)
	// Image builds (docs/builder.md).
	f.StringVar(&cfg.Build.Builder, "builder", "", "image builder: none or layer (default layer when --base-image is set, none otherwise)")
	f.StringSliceVar(&cfg.Build.BaseImages, "base-image", nil, "base image of a python version, <version>=<image> (repeatable)")
	f.IntVar(&cfg.Build.Workers, "build-workers", 2, "images built at once")
	f.StringVar(&cfg.Build.RegistryAuthFile, "registry-auth-file", "", "Docker config file with the registries' credentials (default: anonymous)")
	f.BoolVar(&cfg.Build.RegistryInsecure, "registry-insecure", false, "plain HTTP to a registry on a loopback address")
	f.StringVar(&cfg.Build.PipIndexURL, "pip-index-url", "", "pip --index-url for requirements.txt (default: pip's own)")
	f.StringSliceVar(&cfg.Build.PipExtraIndexURLs, "pip-extra-index-url", nil, "pip --extra-index-url (repeatable)")
	f.StringSliceVar(&cfg.Build.PipFindLinks, "pip-find-links", nil, "pip --find-links (repeatable)")

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

	return serveCommand{command: cmd, run: func(ctx context.Context, databaseURL, kubeconfig string, out io.Writer) error {
		c, err := build()
		if err != nil {
			return err
		}
		c.DatabaseURL, c.Kubeconfig = databaseURL, kubeconfig
		c = withDevImages(ctx, c)
		// dev serves on loopback only, without login (auth mode none).
		c.Listen, c.Auth.Mode = "127.0.0.1:8092", server.AuthNone
		cluster, err := kube.Connect(kube.ClusterConfig{Kubeconfig: kubeconfig})
		if err != nil {
			return err
		}
		if err := cluster.EnsureNamespace(ctx, c.Namespace); err != nil {
			return err
		}
		ready := make(chan net.Addr, 1)
		go func() {
			select {
			case addr := <-ready:
				fmt.Fprintf(out, "datajobs API: http://%s\n", localURL(addr))
			case <-ctx.Done():
			}
		}()
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
	f.StringVar(&r.cpuRequest, "default-cpu-request", "1", "CPU request of deployments that set none")
	f.StringVar(&r.cpuLimit, "default-cpu-limit", "2", "CPU limit of deployments that set none")
	f.StringVar(&r.memRequest, "default-memory-request", "500Mi", "memory request of deployments that set none")
	f.StringVar(&r.memLimit, "default-memory-limit", "1000Mi", "memory limit of deployments that set none")
	f.StringVar(&r.maxCPU, "max-cpu", "16", "largest CPU request or limit a deployment may set")
	f.StringVar(&r.maxMemory, "max-memory", "64Gi", "largest memory request or limit a deployment may set")
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
