package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"sync"

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
		if c.Resources, err = res.bounds(); err != nil {
			return c, err
		}
		c.JobAPIURL, c.JobServiceAccount = res.jobAPIURL, res.jobServiceAccount
		c.JobEphemeralStorageBytes, err = res.ephemeralStorageBytes()
		return c, err
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := build()
		if err != nil {
			return err
		}
		return server.Run(cmd.Context(), c, nil)
	}
	registerServeFlags(cmd.Flags(), &cfg, &serveFlagVars{syncMode: &syncMode, res: &res, introspection: &introspection, authMode: &authMode})

	return serveCommand{command: cmd, run: func(ctx context.Context, databaseURL, kubeconfig string, out io.Writer) error {
		c, err := build()
		if err != nil {
			return err
		}
		c.DatabaseURL, c.Kubeconfig = databaseURL, kubeconfig
		c = withDevImages(ctx, c)
		// dev serves on loopback (dev's --listen), without login (auth mode none).
		c.Listen, c.AdminListen = devListen(ctx)
		c.Auth.Mode = server.AuthNone
		// dev's webhook receivers run on the same machine.
		c.NotificationWebhookAllowPrivate = true
		c.Secrets.KeyFile = cmp.Or(c.Secrets.KeyFile, devSecretsKeyFile(ctx))
		// The real node's pods reach the API through dev's forward on the node's gateway.
		c.JobAPIURL = cmp.Or(c.JobAPIURL, devJobAPIURL(ctx))
		// Notification mails go to dev's Mailpit, shown in its web UI.
		c = withDevMail(ctx, c)
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
				fmt.Fprintf(out, "datajobs console: http://%s/ui/\n", localURL(addr))
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
	ephemeralStorage                           string
	// jobAPIURL and jobServiceAccount are the job pods' identity (kube.RenderConfig):
	// they change the rendered pods, so every command that renders takes them.
	jobAPIURL, jobServiceAccount string
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
	f.StringVar(&r.ephemeralStorage, "job-ephemeral-storage-limit", job.MemoryQuantity(kube.DefaultEphemeralStorageLimitBytes), "ephemeral-storage limit of every job container (its disk: past it the kubelet evicts the pod)")
	f.StringVar(&r.jobAPIURL, "job-api-url", "", "URL of this API as job pods reach it, given to them as VDK_CONTROL_SERVICE_REST_API_URL (default: none)")
	f.StringVar(&r.jobServiceAccount, "job-service-account", kube.DefaultJobServiceAccount, "ServiceAccount of the job pods, without RBAC permissions: its projected token is the job's identity to the API")
}

// ephemeralStorageBytes is --job-ephemeral-storage-limit in bytes.
func (r *resourceFlags) ephemeralStorageBytes() (int64, error) {
	v, err := job.MemoryFromQuantity("job-ephemeral-storage-limit", r.ephemeralStorage)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("--job-ephemeral-storage-limit %q: must be a positive Kubernetes quantity", r.ephemeralStorage)
	}
	return v, nil
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
