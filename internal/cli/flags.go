package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/server"
	"github.com/datajobs/datajobs/internal/synchronizer"
)

// The flags several commands take are declared here, each once, with the default the
// code uses too (a named constant of the package that owns the setting): a flag's name,
// default and environment variable cannot differ between two commands.

// required ends the usage of a flag a command cannot do without.
const required = " (required)"

// addDatabaseURL declares --database-url; note ends its usage (required, or what the
// command does with it when it is optional).
func addDatabaseURL(f *pflag.FlagSet, p *string, note string) {
	f.StringVar(p, "database-url", "", "PostgreSQL connection URL"+note)
}

// addKubeconfig declares --kubeconfig.
func addKubeconfig(f *pflag.FlagSet, p *string) {
	f.StringVar(p, "kubeconfig", "", "kubeconfig path (default: $KUBECONFIG, then the in-cluster config)")
}

// addNamespace declares --namespace, the namespace of the CronJobs; note ends its usage.
func addNamespace(f *pflag.FlagSet, p *string, note string) {
	f.StringVar(p, "namespace", server.DefaultNamespace, "namespace of the CronJobs"+note)
}

// addSecretsKeyFile declares --secrets-key-file, whose use each command says.
func addSecretsKeyFile(f *pflag.FlagSet, p *string, usage string) {
	f.StringVar(p, "secrets-key-file", "", usage)
}

// requireFlag is the PreRunE of a command that cannot run without the string flag name,
// whose value is at p.
func requireFlag(name string, p *string) func(*cobra.Command, []string) error {
	return func(*cobra.Command, []string) error {
		if *p == "" {
			return fmt.Errorf("--%s is required", name)
		}
		return nil
	}
}

// addPythonFlags declares --supported-python-versions and --default-python-version,
// defaulting to the domain's (job.DefaultSupportedPythonVersions, job.DefaultPythonVersion).
func addPythonFlags(f *pflag.FlagSet, versions *[]string, def *string, versionsUsage, defUsage string) {
	f.StringSliceVar(versions, "supported-python-versions", job.DefaultSupportedPythonVersions(), versionsUsage)
	f.StringVar(def, "default-python-version", job.DefaultPythonVersion, defUsage)
}

// addMaxExecutionTimeout declares --max-execution-timeout, which also sets the deadline
// of the Jobs of runs that set no timeout (below 12 h): serve and sync --once render it.
func addMaxExecutionTimeout(f *pflag.FlagSet, p *time.Duration) {
	f.DurationVar(p, "max-execution-timeout", server.DefaultMaxExecutionTimeout, "largest timeout_seconds a deployment may set (400 above); below 12h also the timeout of runs that set none")
}

// addGuardFlags declares the synchronizer's guards of serve and sync --once: the
// mass-prune guard, the configuration fingerprint and the restore guard. dryRun is the
// command's flag for a pass that writes nothing.
func addGuardFlags(f *pflag.FlagSet, s *server.SafetyConfig, dryRun string) {
	f.Float64Var(&s.PruneMaxFraction, "prune-max-fraction", synchronizer.DefaultPruneMaxFraction, "largest share of this installation's CronJobs one pass deletes as orphans (no data job knows them); above it, and on a database without any job, none is deleted")
	f.BoolVar(&s.AllowMassPrune, "allow-mass-prune", false, "lift the --prune-max-fraction guard: delete every orphaned CronJob of this installation, however many")
	f.BoolVar(&s.AcceptConfigChange, "accept-config-change", false, "sync although the rendering configuration (namespace, image registry, resource defaults) differs from the one the previous leader synced with, and make it the recorded one")
	f.BoolVar(&s.AcceptRestore, "accept-restore", false, "sync although live CronJobs of this installation are newer than the database (restored from an older backup): roll them back to the database and re-stamp them; check with "+dryRun+" first")
}

// renderFlags are the flags of every command that renders CronJobs (serve, sync --once,
// import): the namespace, the image registry and the job pods' resources and identity.
// Given the same values the commands render the same CronJobs.
type renderFlags struct {
	namespace, registry string
	resourceFlags
}

// register declares the flags; namespaceNote ends --namespace's usage, registryNote
// --image-registry's.
func (r *renderFlags) register(f *pflag.FlagSet, namespaceNote, registryNote string) {
	addNamespace(f, &r.namespace, namespaceNote)
	f.StringVar(&r.registry, "image-registry", server.DefaultImageRegistry, "registry of job images"+registryNote)
	r.resourceFlags.register(f)
}

// render is the rendering configuration the flags give.
func (r *renderFlags) render() (kube.RenderConfig, error) {
	bounds, err := r.bounds()
	if err != nil {
		return kube.RenderConfig{}, err
	}
	ephemeral, err := r.ephemeralStorageBytes()
	if err != nil {
		return kube.RenderConfig{}, err
	}
	return kube.RenderConfig{
		Namespace: r.namespace, ImageRegistry: r.registry, Resources: bounds, EphemeralStorageLimitBytes: ephemeral,
		JobAPIURL: r.jobAPIURL, JobServiceAccount: r.jobServiceAccount, JobServiceAccountTemplate: r.jobServiceAccountTemplate,
	}, nil
}

// apply sets c's rendering settings from the flags.
func (r *renderFlags) apply(c *server.Config) error {
	rc, err := r.render()
	if err != nil {
		return err
	}
	c.Namespace, c.ImageRegistry, c.Resources, c.JobEphemeralStorageBytes = rc.Namespace, rc.ImageRegistry, rc.Resources, rc.EphemeralStorageLimitBytes
	c.JobAPIURL, c.JobServiceAccount, c.JobServiceAccountTemplate = rc.JobAPIURL, rc.JobServiceAccount, rc.JobServiceAccountTemplate
	return nil
}

// resourceFlags are the default and maximum job resources, as Kubernetes quantities.
type resourceFlags struct {
	cpuRequest, cpuLimit, memRequest, memLimit string
	maxCPU, maxMemory                          string
	ephemeralStorage                           string
	// jobAPIURL and jobServiceAccount are the job pods' identity (kube.RenderConfig):
	// they change the rendered pods, so every command that renders takes them.
	jobAPIURL, jobServiceAccount, jobServiceAccountTemplate string
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
	f.StringVar(&r.jobServiceAccountTemplate, "job-service-account-template", job.DefaultServiceAccountTemplate, "ServiceAccount of a team's job pods, {team} replaced by the team (an execution profile may name another template): one per team, annotated by the operator for the team's cloud identity (docs/profiles.md)")
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
