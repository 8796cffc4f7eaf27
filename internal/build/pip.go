package build

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// PipConfig is how requirements are resolved: pip on the builder's host downloads binary
// wheels only, for the image's platform and python version, and the builder unpacks them
// itself (wheel.go). No package code runs at build time: pip runs no setup.py or build
// backend for a wheel, and nothing installs the wheels but the builder's own Go code.
type PipConfig struct {
	// Command runs pip (default: the python3 on PATH, resolved once to its executable,
	// with -m pip). Any pip of version 20.3 or newer will do.
	Command []string
	// IndexURL, ExtraIndexURLs and FindLinks pass through as --index-url,
	// --extra-index-url and --find-links. Empty: PyPI. An extra index mixes indexes: pip
	// takes the highest version of a name from any of them (dependency confusion).
	IndexURL       string
	ExtraIndexURLs []string
	FindLinks      []string
	// Platforms are the wheel platform tags accepted (default: manylinux 2.5 to 2.36 of
	// the base image's architecture, the glibc of Debian bookworm's python images).
	Platforms []string
	// Timeout bounds one run of pip (default 10m); over it, the build is a user error.
	Timeout time.Duration
	// MemoryBytes is pip's address-space limit (RLIMIT_AS, default 2 GiB).
	MemoryBytes int64
}

// Defaults of PipConfig.
const (
	DefaultPipTimeout     = 10 * time.Minute
	DefaultPipMemoryBytes = 2 << 30
)

// maxGlibcMinor is the newest glibc the default platform tags accept (Debian bookworm).
const maxGlibcMinor = 36

// platforms are the wheel platform tags for an image architecture (a GOARCH name).
func (c PipConfig) platforms(arch string) []string {
	if len(c.Platforms) > 0 {
		return c.Platforms
	}
	machine := map[string]string{"amd64": "x86_64", "arm64": "aarch64", "386": "i686", "ppc64le": "ppc64le", "s390x": "s390x"}[arch]
	if machine == "" {
		machine = "x86_64"
	}
	// pip expands only the legacy manylinux2014 tag to older ones; the PEP 600 tags are
	// listed one by one.
	tags := []string{"manylinux2014_" + machine}
	for minor := maxGlibcMinor; minor >= 17; minor-- {
		tags = append(tags, fmt.Sprintf("manylinux_2_%d_%s", minor, machine))
	}
	return tags
}

// pipCommand is the command line that runs pip. The default python3 is resolved to its
// executable with the service's environment (no job input is involved), because pip then
// runs with an environment of its own (pipEnv) in which a PATH shim may not work.
func (c PipConfig) pipCommand(ctx context.Context) ([]string, error) {
	if len(c.Command) > 0 {
		exe, err := exec.LookPath(c.Command[0])
		if err != nil {
			return nil, fmt.Errorf("pip command %q: %w", c.Command[0], err)
		}
		return append([]string{exe}, c.Command[1:]...), nil
	}
	out, err := exec.CommandContext(ctx, "python3", "-c", "import sys; print(sys.executable)").Output()
	exe := strings.TrimSpace(string(out))
	if err != nil || !filepath.IsAbs(exe) {
		return nil, fmt.Errorf("find python3 for pip %q: %w", exe, err)
	}
	return []string{exe, "-m", "pip"}, nil
}

// pipEnv is all of pip's environment: none of the service's variables (database URL,
// OIDC secret, registry credentials …) is there for pip to expand or quote, and no pip
// configuration but the command line applies.
func pipEnv(scratch string) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + filepath.Join(scratch, "home"),
		"TMPDIR=" + filepath.Join(scratch, "tmp"),
		"PIP_CONFIG_FILE=" + os.DevNull,
		"PIP_NO_INPUT=1", "PIP_DISABLE_PIP_VERSION_CHECK=1",
		"PYTHONDONTWRITEBYTECODE=1", "PYTHONNOUSERSITE=1", "LC_ALL=C.UTF-8",
	}
}

// Causes of a stopped pip.
var (
	errPipTimeout = errors.New("pip took too long")
	errPipTooBig  = errors.New("pip's downloads are over the build's byte limit")
)

// pipDownload has pip download the wheels of reqs (with their dependencies) into
// scratch/wheels, for the python version and architecture, within budget bytes of disk,
// and returns that folder. A failure caused by the requirements is a *UserError naming
// the requirement and quoting pip.
func (c PipConfig) pipDownload(ctx context.Context, reqs []Requirement, python, arch, scratch string, budget int64) (string, error) {
	wheels := filepath.Join(scratch, "wheels")
	for _, d := range []string{wheels, filepath.Join(scratch, "home"), filepath.Join(scratch, "tmp")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return "", fmt.Errorf("scratch folder: %w", err)
		}
	}
	reqFile := filepath.Join(scratch, "requirements.txt")
	if err := os.WriteFile(reqFile, RenderRequirements(reqs), 0o600); err != nil {
		return "", fmt.Errorf("write requirements: %w", err)
	}
	cmdline, err := c.pipCommand(ctx)
	if err != nil {
		return "", err
	}
	args := append(cmdline[1:], "download", "--isolated", "--only-binary=:all:", "--implementation", "cp",
		"--python-version", python, "--dest", wheels, "--no-cache-dir", "--no-input",
		"--disable-pip-version-check", "--progress-bar", "off")
	for _, p := range c.platforms(arch) {
		args = append(args, "--platform", p)
	}
	if c.IndexURL != "" {
		args = append(args, "--index-url", c.IndexURL)
	}
	for _, u := range c.ExtraIndexURLs {
		args = append(args, "--extra-index-url", u)
	}
	for _, l := range c.FindLinks {
		args = append(args, "--find-links", l)
	}
	args = append(args, "-r", reqFile)
	timeout := cmp.Or(c.Timeout, DefaultPipTimeout)
	out, err := c.run(ctx, exec.Command(cmdline[0], args...), scratch, timeout, budget)
	switch {
	case err == nil:
		return wheels, nil
	case errors.Is(err, errPipTooBig) || strings.Contains(out, "File too large"): // RLIMIT_FSIZE
		return "", userErrorf("the requirements need more than %d bytes of downloads, the limit of a build (--max-build-bytes)", budget)
	case errors.Is(err, errPipTimeout):
		return "", userErrorf("pip did not resolve and download the requirements within %s, the limit of a build; pin versions to spare it the search, then retry", timeout)
	case ctx.Err() != nil:
		return "", fmt.Errorf("pip download: %w", context.Cause(ctx))
	case strings.Contains(out, "MemoryError") || strings.Contains(out, "Cannot allocate memory"): // RLIMIT_AS
		return "", userErrorf("pip ran out of memory (%d bytes, the limit of a build) resolving the requirements; pin versions to spare it the search", cmp.Or(c.MemoryBytes, DefaultPipMemoryBytes))
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return "", fmt.Errorf("run pip (%s): %w", cmdline[0], err)
	}
	return "", pipFailure(out)
}

// run runs pip in scratch with pipEnv, its memory and file sizes limited, stopped after
// timeout or once scratch holds more than budget bytes. It returns pip's output.
func (c PipConfig) run(ctx context.Context, cmd *exec.Cmd, scratch string, timeout time.Duration, budget int64) (string, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ctx, stop := context.WithTimeoutCause(ctx, timeout, errPipTimeout)
	defer stop()
	cmd.Dir, cmd.Env = scratch, pipEnv(scratch)
	// pip dies with the builder: a killed leader leaves no pip behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	// Set right after the start: python's own start-up is all that runs before.
	mem := uint64(cmp.Or(c.MemoryBytes, DefaultPipMemoryBytes))
	_ = unix.Prlimit(cmd.Process.Pid, unix.RLIMIT_AS, &unix.Rlimit{Cur: mem, Max: mem}, nil)
	_ = unix.Prlimit(cmd.Process.Pid, unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: uint64(budget), Max: uint64(budget)}, nil)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	stopped := ctx.Done()
	for {
		select {
		case err := <-done:
			if cause := context.Cause(ctx); cause != nil && err != nil {
				return out.String(), cause
			}
			return out.String(), err
		case <-stopped:
			_ = cmd.Process.Kill()
			stopped = nil
		case <-tick.C:
			if used, _ := diskUsage(scratch); used > budget {
				cancel(errPipTooBig)
			}
		}
	}
}

// diskUsage is the size of the files under dir.
func diskUsage(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil //nolint:nilerr // a file pip removed meanwhile
		}
		if info, err := d.Info(); err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
		return nil
	})
	return n, err
}

var (
	reNoMatch   = regexp.MustCompile(`(?:No matching distribution found for|satisfies the requirement) (\S+)`)
	reConflict  = regexp.MustCompile(`Cannot install (.+?) because these package versions have conflicting dependencies`)
	reTransient = regexp.MustCompile(`NewConnectionError|Max retries exceeded|ConnectTimeoutError|Temporary failure in name resolution|No space left on device|Read timed out`)
)

// pipFailure turns pip's output into an error: a *UserError naming the requirement when pip
// says the requirements cannot be met; a platform error when it could not reach an index.
func pipFailure(output string) error {
	reason := pipErrors(output)
	switch {
	case reTransient.MatchString(output):
		return fmt.Errorf("pip could not reach the package index: %s", reason)
	case reNoMatch.MatchString(output):
		req := reNoMatch.FindStringSubmatch(output)[1]
		return userErrorf("requirement %s cannot be installed: no binary wheel of it fits python and the image's platform (or it does not exist). pip says: %s", req, reason)
	case reConflict.MatchString(output):
		return userErrorf("requirements %s conflict. pip says: %s", reConflict.FindStringSubmatch(output)[1], reason)
	case reason != "":
		return userErrorf("the requirements cannot be installed. pip says: %s", reason)
	}
	return fmt.Errorf("pip failed without saying why: %s", tail(output, 500))
}

// pipErrors joins pip's ERROR lines, bounded.
func pipErrors(output string) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(output))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); strings.HasPrefix(l, "ERROR:") {
			lines = append(lines, l)
		}
	}
	return tail(strings.Join(lines, " "), 1500)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
