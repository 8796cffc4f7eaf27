package job

import "slices"

// The platform defaults of a deployment, in one place: the service validates requests
// against them, the renderer fills them into CronJobs, and serve, sync and import take
// them as the defaults of their flags. They are VDK's code defaults for the resources a
// deployment gets, and this project's maxima.
var (
	// DefaultResources: requests 1 CPU and 500Mi, limits 2 CPU and 1000Mi; at most 16 CPUs
	// and 64Gi for any request or limit.
	DefaultResources = ResourceBounds{
		Default: Resources{CPURequestMillis: 1000, CPULimitMillis: 2000, MemoryRequestBytes: 500 << 20, MemoryLimitBytes: 1000 << 20},
		Max:     Resources{CPURequestMillis: 16_000, CPULimitMillis: 16_000, MemoryRequestBytes: 64 << 30, MemoryLimitBytes: 64 << 30},
	}
	// DefaultPythonVersion is the python version of a deployment that names none.
	DefaultPythonVersion  = "3.11"
	defaultPythonVersions = []string{"3.9", "3.10", "3.11", "3.12"}
)

// DefaultSupportedPythonVersions are the python versions a deployment may use by default.
func DefaultSupportedPythonVersions() []string { return slices.Clone(defaultPythonVersions) }

// WithDefaults returns the bounds with every zero field taken from DefaultResources.
func (b ResourceBounds) WithDefaults() ResourceBounds {
	fill := func(r *Resources, d Resources) {
		r.CPURequestMillis = or(r.CPURequestMillis, d.CPURequestMillis)
		r.CPULimitMillis = or(r.CPULimitMillis, d.CPULimitMillis)
		r.MemoryRequestBytes = or(r.MemoryRequestBytes, d.MemoryRequestBytes)
		r.MemoryLimitBytes = or(r.MemoryLimitBytes, d.MemoryLimitBytes)
	}
	fill(&b.Default, DefaultResources.Default)
	fill(&b.Max, DefaultResources.Max)
	return b
}

func or(v, d int64) int64 {
	if v != 0 {
		return v
	}
	return d
}

// CPUQuantity and MemoryQuantity write millicores and bytes as Kubernetes quantities
// ("1500m", "500Mi"), as flags and messages show them.
func CPUQuantity(millis int64) string { return formatQuantity(millis, true) }

// MemoryQuantity writes bytes as a Kubernetes quantity (see CPUQuantity).
func MemoryQuantity(bytes int64) string { return formatQuantity(bytes, false) }
