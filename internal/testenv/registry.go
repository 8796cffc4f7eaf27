package testenv

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/datajobs/datajobs/internal/devenv"
)

// EnvRegistry names a running OCI registry (host:port on loopback, plain HTTP), as
// `datajobs dev --env-only` writes it to its env file when it runs one.
const EnvRegistry = "DATAJOBS_TEST_REGISTRY"

// registries are the registries this binary started, stopped by Main.
var registries struct {
	mu      sync.Mutex
	shared  *devenv.Registry
	started []*devenv.Registry
	dirs    []string
}

// Registry returns the address (host:port) of a real OCI registry (CNCF Distribution):
// the environment's (EnvRegistry), else one this test binary starts on first use, built
// with hack/registry/build.sh if needed. Tests share it: each uses its own repositories.
func Registry(t testing.TB) string {
	t.Helper()
	get(t)
	if addr := os.Getenv(EnvRegistry); addr != "" {
		return addr
	}
	registries.mu.Lock()
	defer registries.mu.Unlock()
	if registries.shared == nil {
		registries.shared = startRegistry(t)
	}
	return registries.shared.Addr
}

// StartRegistry starts a registry of t's own, for tests that stop and start it; it is
// stopped when t ends.
func StartRegistry(t testing.TB) *devenv.Registry {
	t.Helper()
	get(t)
	registries.mu.Lock()
	defer registries.mu.Unlock()
	r := startRegistry(t)
	t.Cleanup(func() {
		if err := r.Stop(); err != nil {
			t.Errorf("testenv: stop registry: %v", err)
		}
	})
	return r
}

// startRegistry builds (when needed) and starts a registry; registries.mu is held.
func startRegistry(t testing.TB) *devenv.Registry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bin := builtBinary(t, devenv.EnsureRegistryBinary)
	dir, err := os.MkdirTemp("", "datajobs-registry-")
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	registries.dirs = append(registries.dirs, dir)
	r, err := devenv.StartRegistry(ctx, devenv.RegistryConfig{Bin: bin, Dir: dir, LogPath: filepath.Join(dir, "registry.log")})
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	registries.started = append(registries.started, r)
	return r
}

// stopRegistries stops every registry this binary started and removes their storage.
func stopRegistries() error {
	registries.mu.Lock()
	defer registries.mu.Unlock()
	var first error
	for _, r := range registries.started {
		if err := r.Stop(); err != nil && first == nil {
			first = err
		}
	}
	for _, d := range registries.dirs {
		os.RemoveAll(d)
	}
	registries.shared, registries.started, registries.dirs = nil, nil, nil
	return first
}
