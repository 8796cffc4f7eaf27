package server

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/datajobs/datajobs/internal/build"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/synchronizer"
)

// The builders of --builder.
const (
	BuilderNone  = "none"  // images are built by someone else: <registry>/<job>:<version>
	BuilderLayer = "layer" // build.LayerBuilder, in the synchronizer leader
)

// DefaultMaxBuildBytes is --max-build-bytes's default.
const DefaultMaxBuildBytes = build.DefaultMaxBuildBytes

// DefaultPipTimeout and DefaultPipMemoryBytes are --pip-timeout's and --pip-memory-bytes's.
const (
	DefaultPipTimeout     = build.DefaultPipTimeout
	DefaultPipMemoryBytes = build.DefaultPipMemoryBytes
)

// BuildConfig is the image builder's part of Config (docs/builder.md).
type BuildConfig struct {
	// Builder is none or layer (default layer when BaseImages is set, none otherwise).
	Builder string
	// BaseImages are "<python version>=<image reference>" pairs (--base-image).
	BaseImages []string
	// Workers build that many images at once (default DefaultBuildWorkers, 2).
	Workers int
	// RegistryAuthFile is a Docker config file with the registries' credentials ("":
	// anonymous).
	RegistryAuthFile string
	// RegistryInsecure allows plain HTTP to a registry on a loopback address.
	RegistryInsecure bool
	// VerifyPrebuiltImages looks the image of a job version that is no uploaded sources
	// version up in the registry, and pins it by digest, before a CronJob points at it
	// (--verify-prebuilt-images, on by default; off: <registry>/<job>:<version> unchecked).
	VerifyPrebuiltImages bool
	// PipIndexURL, PipExtraIndexURLs and PipFindLinks pass through to pip.
	PipIndexURL       string
	PipExtraIndexURLs []string
	PipFindLinks      []string
	// PipTimeout bounds one run of pip, PipMemoryBytes its address space (defaults
	// build.DefaultPipTimeout, 10m, and build.DefaultPipMemoryBytes, 2 GiB); over either,
	// the build is a user error.
	PipTimeout     time.Duration
	PipMemoryBytes int64
	// MaxBuildBytes bounds the disk of one build (default build.DefaultMaxBuildBytes).
	MaxBuildBytes int64
}

// withDefaults picks the builder and checks the base images.
func (c BuildConfig) withDefaults() (BuildConfig, error) {
	if c.Builder == "" {
		c.Builder = BuilderNone
		if len(c.BaseImages) > 0 {
			c.Builder = BuilderLayer
		}
	}
	switch {
	case c.Builder != BuilderNone && c.Builder != BuilderLayer:
		return c, fmt.Errorf("builder %q: must be none or layer", c.Builder)
	case c.Builder == BuilderLayer && len(c.BaseImages) == 0:
		return c, fmt.Errorf("the layer builder needs at least one --base-image <python version>=<image>")
	case c.Workers < 0:
		return c, fmt.Errorf("build workers must be at least 1, not %d", c.Workers)
	}
	c.Workers = cmp.Or(c.Workers, DefaultBuildWorkers)
	return c, nil
}

// newBuildStage builds the synchronizer's build stage from the configuration: the builder
// of --builder layer and the resolver of --verify-prebuilt-images.
func newBuildStage(cfg Config, db *store.Store, reg prometheus.Registerer) (synchronizer.BuildConfig, error) {
	c := cfg.Build
	metrics := synchronizer.NewBuildMetrics(reg)
	var keychain authn.Keychain
	if c.RegistryAuthFile != "" {
		kc, err := build.AuthFileKeychain(c.RegistryAuthFile)
		if err != nil {
			return synchronizer.BuildConfig{}, err
		}
		keychain = kc
	}
	out := synchronizer.BuildConfig{Store: db, Workers: c.Workers, Metrics: metrics}
	if c.VerifyPrebuiltImages {
		out.Resolver = build.NewResolver(build.ResolverConfig{
			Keychain: keychain, Transport: metrics.Transport(remote.DefaultTransport), Insecure: c.RegistryInsecure,
		})
	} else if cfg.Logger != nil {
		cfg.Logger.Warn("prebuilt_images_unverified", "detail",
			"--verify-prebuilt-images=false: a job version that is no uploaded sources version deploys <registry>/<job>:<version> without looking it up")
	}
	if c.Builder != BuilderLayer {
		return out, nil
	}
	bases, err := baseImages(c.BaseImages)
	if err != nil {
		return synchronizer.BuildConfig{}, err
	}
	bc := build.Config{
		Registry: cfg.ImageRegistry, BaseImages: bases, Insecure: c.RegistryInsecure,
		Transport: metrics.Transport(remote.DefaultTransport),
		Pip: build.PipConfig{
			IndexURL: c.PipIndexURL, ExtraIndexURLs: c.PipExtraIndexURLs, FindLinks: c.PipFindLinks,
			Timeout: c.PipTimeout, MemoryBytes: c.PipMemoryBytes,
		},

		MaxBuildBytes: c.MaxBuildBytes,
		Keychain:      keychain,
	}
	if len(c.PipExtraIndexURLs) > 0 && cfg.Logger != nil {
		// pip takes the highest version of a name from any index: whoever can publish a
		// name on one index can replace the package of that name on the other.
		cfg.Logger.Warn("pip_extra_index_url_mixes_indexes", "extra_index_urls", len(c.PipExtraIndexURLs),
			"risk", "dependency confusion: pip installs the highest version of a name found on any index; prefer one index that proxies the others (docs/builder.md)")
	}
	builder, err := build.NewLayerBuilder(bc)
	if err != nil {
		return synchronizer.BuildConfig{}, err
	}
	out.Builder = builder
	return out, nil
}

// baseImages parses --base-image's "<python version>=<image reference>" pairs.
func baseImages(pairs []string) (map[string]string, error) {
	bases := map[string]string{}
	for _, pair := range pairs {
		py, ref, ok := strings.Cut(pair, "=")
		if !ok || py == "" || ref == "" {
			return nil, fmt.Errorf("--base-image %q: want <python version>=<image reference>", pair)
		}
		bases[py] = ref
	}
	return bases, nil
}

// runnablePythonVersions narrows supported to the python versions the layer builder has a
// base image of: only those can run here, so only those are listed by /info and accepted
// by a deployment (a job deployed with another built nothing that could run, and every
// run failed, issue 48). Without the layer builder, job images are someone else's: the
// configured versions stand.
func runnablePythonVersions(c BuildConfig, supported []string, def string) ([]string, error) {
	if c.Builder != BuilderLayer || !slices.Contains(supported, def) {
		return supported, nil // without a default among them, withDefaults says so
	}
	bases, err := baseImages(c.BaseImages)
	if err != nil {
		return nil, err
	}
	runnable := slices.DeleteFunc(slices.Clone(supported), func(py string) bool { return bases[py] == "" })
	if !slices.Contains(runnable, def) {
		return nil, fmt.Errorf("default python version %q has no base image (--base-image %s=<image>); the supported versions with one: %v",
			def, def, runnable)
	}
	return runnable, nil
}
