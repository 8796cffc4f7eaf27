package build

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
)

// PipConfig is how requirements are resolved: by pip on the builder's host, binary wheels
// only (no package code runs at build time), for the image's platform and python version.
type PipConfig struct {
	// Command runs pip (default: python3 -m pip). Any pip of version 20.3 or newer will do:
	// it never runs the wheels it downloads.
	Command []string
	// IndexURL, ExtraIndexURLs and FindLinks pass through as --index-url,
	// --extra-index-url and --find-links. Empty: pip's own configuration.
	IndexURL       string
	ExtraIndexURLs []string
	FindLinks      []string
	// Platforms are the wheel platform tags accepted (default: manylinux 2.5 to 2.36 of
	// the base image's architecture, the glibc of Debian bookworm's python images).
	Platforms []string
}

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

// pipInstall installs requirements into target with pip, as wheels for the python version
// and architecture. A failure caused by the requirements is a *UserError naming the
// requirement and quoting pip.
func (c PipConfig) pipInstall(ctx context.Context, requirements []byte, python, arch, tmp, target string) error {
	if n, err := checkRequirements(requirements); err != nil || n == 0 {
		return err // nothing to install: an empty folder
	}
	reqFile := filepath.Join(tmp, "requirements.txt")
	if err := os.WriteFile(reqFile, requirements, 0o600); err != nil {
		return fmt.Errorf("write requirements: %w", err)
	}
	cmdline := append([]string{}, c.Command...)
	if len(cmdline) == 0 {
		cmdline = []string{"python3", "-m", "pip"}
	}
	args := append(cmdline[1:], "install", "--only-binary=:all:", "--implementation", "cp",
		"--python-version", python, "--target", target, "--no-compile", "--no-input",
		"--disable-pip-version-check", "--no-warn-script-location", "--progress-bar", "off")
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
	cmd := exec.CommandContext(ctx, cmdline[0], args...)
	cmd.Dir = tmp
	// pip dies with the builder: a killed leader leaves no pip behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Env = append(os.Environ(), "PIP_NO_INPUT=1", "PIP_DISABLE_PIP_VERSION_CHECK=1", "PYTHONDONTWRITEBYTECODE=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("pip install: %w", context.Cause(ctx))
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return fmt.Errorf("run pip (%s): %w", cmdline[0], err)
	}
	return pipFailure(out.String())
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

// checkRequirements refuses pip options and direct references in requirements.txt: they
// would let a job point the service's pip at any index, URL or file of the builder's
// host. Indexes are the service's configuration (--pip-index-url and friends). It returns
// the number of requirements.
func checkRequirements(requirements []byte) (int, error) {
	count := 0
	sc := bufio.NewScanner(bytes.NewReader(requirements))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if i := strings.Index(line, " #"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		switch {
		case strings.HasPrefix(line, "-"):
			return 0, userErrorf("requirements.txt line %d (%q): pip options are not allowed; the service's configuration names the package indexes", n, line)
		case strings.Contains(line, "://") || strings.Contains(line, " @ ") || strings.HasPrefix(line, ".") || strings.HasPrefix(line, "/"):
			return 0, userErrorf("requirements.txt line %d (%q): direct references (URLs, paths) are not allowed; name a package from the index", n, line)
		}
		count++
	}
	return count, nil
}
