package devenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// buildScript is the script, relative to the repository root, that builds the pinned
// Kubernetes binaries into binDirInRepo.
const (
	buildScript  = "hack/k8s-bins/build.sh"
	binDirInRepo = ".cache/k8s-bin"
)

// kubeBinaries are the files the control plane needs in Config.BinDir, by component.
var kubeBinaries = []string{"etcd", "kube-apiserver"}

// controllerBinaries are the extra files Config.Controllers needs; kwokBinaries those of
// the fake node, kubelet that of the real one.
var (
	controllerBinaries = []string{"kube-controller-manager", "kube-scheduler"}
	kwokBinaries       = []string{"kwok", "kwok-stages.yaml"}
)

// RepoRoot finds the datajobs checkout: the nearest folder holding hack/k8s-bins/build.sh,
// looking up from the working directory and then from this source file (which is where
// a test binary's sources were compiled from).
func RepoRoot() (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok {
		starts = append(starts, filepath.Dir(file))
	}
	for _, dir := range starts {
		for {
			if _, err := os.Stat(filepath.Join(dir, buildScript)); err == nil {
				return dir, nil
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return "", fmt.Errorf("find the datajobs checkout: no %s above %s", buildScript, strings.Join(starts, " or "))
}

// EnsureBinaries builds the pinned Kubernetes binaries (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kubectl, kwok) with hack/k8s-bins/build.sh and
// returns the folder holding them. The script is stamped: when the binaries are up to date
// it returns at once; a cold build takes minutes and its progress goes to progress.
// Concurrent callers (several test binaries) wait for each other on a file lock.
func EnsureBinaries(ctx context.Context, repoRoot string, progress io.Writer) (string, error) {
	binDir := filepath.Join(repoRoot, binDirInRepo)
	if err := os.MkdirAll(filepath.Dir(binDir), 0o755); err != nil {
		return "", fmt.Errorf("ensure kubernetes binaries: %w", err)
	}
	lock, err := os.OpenFile(binDir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("ensure kubernetes binaries: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("ensure kubernetes binaries: lock: %w", err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing the file unlocks too

	if progress == nil {
		progress = io.Discard
	}
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(repoRoot, buildScript))
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "K8S_BIN_DIR="+binDir)
	cmd.Stdout = progress
	cmd.Stderr = progress
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build kubernetes binaries with %s: %w", buildScript, err)
	}
	return binDir, nil
}

// checkKubeBinaries returns an error naming the first missing file and the fix.
func checkKubeBinaries(binDir string, controllers bool, node NodeKind) error {
	if binDir == "" {
		return errors.New("kubernetes binaries: Config.BinDir is empty; build them with `bash " + buildScript +
			"` (into " + binDirInRepo + ") or call devenv.EnsureBinaries")
	}
	names := kubeBinaries
	if controllers {
		names = slices.Concat(names, controllerBinaries)
		if node != NodeReal {
			names = slices.Concat(names, kwokBinaries)
		}
		if node != NodeKwok {
			names = append(names, "kubelet")
		}
	}
	for _, name := range names {
		if _, err := os.Stat(filepath.Join(binDir, name)); err != nil {
			return fmt.Errorf("kubernetes binaries: %s missing in %s; build it with `bash %s` or call devenv.EnsureBinaries",
				name, binDir, buildScript)
		}
	}
	return nil
}

// minPostgresMajor is the oldest PostgreSQL the service supports.
const minPostgresMajor = 15

var postgresVersion = regexp.MustCompile(`\(PostgreSQL\) (\d+)`)

// findPostgres returns the folder holding initdb and postgres: explicit wins, then the
// newest /usr/lib/postgresql/*/bin (Debian's layout), then `pg_config --bindir`.
func findPostgres(explicit string) (string, error) {
	var candidates []string
	if explicit != "" {
		candidates = []string{explicit}
	} else {
		dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
		slices.SortFunc(dirs, func(a, b string) int { return majorOf(b) - majorOf(a) })
		candidates = dirs
		if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
			candidates = append(candidates, strings.TrimSpace(string(out)))
		}
	}
	for _, dir := range candidates {
		if !isFile(filepath.Join(dir, "initdb")) || !isFile(filepath.Join(dir, "postgres")) {
			continue
		}
		out, err := exec.Command(filepath.Join(dir, "postgres"), "--version").Output()
		if err != nil {
			continue
		}
		m := postgresVersion.FindSubmatch(out)
		if m == nil {
			continue
		}
		if major, _ := strconv.Atoi(string(m[1])); major < minPostgresMajor {
			return "", fmt.Errorf("postgresql in %s is %s; datajobs needs %d or newer: install it with `apt-get install postgresql`",
				dir, strings.TrimSpace(string(out)), minPostgresMajor)
		}
		return dir, nil
	}
	where := "/usr/lib/postgresql/*/bin or `pg_config --bindir`"
	if explicit != "" {
		where = explicit
	}
	return "", fmt.Errorf("postgresql server binaries (initdb, postgres) not found in %s: install them with "+
		"`apt-get install postgresql` (version %d or newer) or set the PostgreSQL bin dir", where, minPostgresMajor)
}

func majorOf(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}
