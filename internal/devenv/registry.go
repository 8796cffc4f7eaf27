package devenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
)

// The OCI registry (CNCF Distribution) of dev mode and the tests, built by its own
// stamped script from the nested module hack/registry.
const (
	registryScript  = "hack/registry/build.sh"
	registryBinRepo = ".cache/registry-bin/registry"
)

// RegistryBinary returns the registry binary built in the checkout, or "" when it has not
// been built (dev mode and the tests then run without a registry, as before).
func RegistryBinary() string { return builtInCheckout(registryBinRepo) }

// builtInCheckout returns the path of what a stamped build script leaves at rel in the
// checkout, or "" when it has not been built: when one of files (paths below it) is
// missing, or, when no files are named, rel itself is not a file.
func builtInCheckout(rel string, files ...string) string {
	root, err := RepoRoot()
	if err != nil {
		return ""
	}
	path := filepath.Join(root, rel)
	if len(files) == 0 {
		files = []string{"."} // Join(path, ".") is path itself
	}
	for _, name := range files {
		if !isFile(filepath.Join(path, name)) {
			return ""
		}
	}
	return path
}

// EnsureRegistryBinary builds the registry with hack/registry/build.sh (instant when its
// stamp matches) and returns its path. Concurrent callers wait on a file lock.
func EnsureRegistryBinary(ctx context.Context, repoRoot string, progress io.Writer) (string, error) {
	return ensureBuilt(ctx, repoRoot, registryScript, registryBinRepo, progress)
}

// ensureBuilt runs the stamped build script (instant when its stamp matches) of the
// binary at binRel in repoRoot and returns the binary's path. Concurrent callers wait on
// a file lock.
func ensureBuilt(ctx context.Context, repoRoot, script, binRel string, progress io.Writer) (string, error) {
	bin := filepath.Join(repoRoot, binRel)
	name := filepath.Base(bin)
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", fmt.Errorf("ensure %s binary: %w", name, err)
	}
	lock, err := os.OpenFile(filepath.Dir(bin)+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("ensure %s binary: %w", name, err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("ensure %s binary: lock: %w", name, err)
	}
	if progress == nil {
		progress = io.Discard
	}
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(repoRoot, script))
	cmd.Dir = repoRoot
	cmd.Stdout, cmd.Stderr = progress, progress
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build %s with %s: %w", name, script, err)
	}
	return bin, nil
}

// Registry is a running CNCF Distribution registry on loopback, plain HTTP, no auth.
type Registry struct {
	*Process
	// Addr is host:port, the registry part of image references (127.0.0.1:<port>).
	Addr string
}

// RegistryConfig configures StartRegistry.
type RegistryConfig struct {
	// Bin is the registry binary. Required.
	Bin string
	// Dir holds the config file and the stored blobs.
	Dir string
	// LogPath receives the registry's output.
	LogPath string
	// Port on 127.0.0.1 to try first; 0 picks a free one. Either is replaced by another
	// free one when another process takes it first (processSpec.picked): read Addr.
	Port   int
	Logger *slog.Logger
}

// StartRegistry starts a registry and waits until GET /v2/ answers.
func StartRegistry(ctx context.Context, cfg RegistryConfig) (*Registry, error) {
	if cfg.Bin == "" {
		return nil, errors.New("registry: no binary; build it with `bash " + registryScript + "`")
	}
	port := cfg.Port
	if port == 0 {
		var err error
		if port, err = freePort(); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(filepath.Join(cfg.Dir, "data"), 0o755); err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	configPath := filepath.Join(cfg.Dir, "config.yml")
	plain := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	r := &Registry{}
	r.Process = newProcess("registry", cfg.LogPath, processSpec{
		path: cfg.Bin, args: []string{"serve", configPath}, dir: cfg.Dir,
		// No OpenTelemetry exporter: there is no collector.
		env:    append(os.Environ(), "OTEL_TRACES_EXPORTER=none"),
		picked: []*int{&port},
		configure: func(s *processSpec) error {
			r.Addr = "127.0.0.1:" + strconv.Itoa(port)
			s.ready = httpReady(plain, "http://"+r.Addr+"/v2/")
			return writeRegistryConfig(configPath, filepath.Join(cfg.Dir, "data"), r.Addr)
		},
	}, cmpLogger(cfg.Logger))
	if err := r.Start(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

func writeRegistryConfig(path, dataDir, addr string) error {
	config := fmt.Sprintf(`version: 0.1
log:
  level: warn
  accesslog: {disabled: true}
storage:
  filesystem: {rootdirectory: %q}
  delete: {enabled: true}
http:
  addr: %s
`, dataDir, addr)
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	return nil
}

func cmpLogger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
