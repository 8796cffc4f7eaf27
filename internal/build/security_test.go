package build_test

import (
	"crypto/rand"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/build"
	"github.com/datajobs/datajobs/internal/build/buildtest"
	"github.com/datajobs/datajobs/internal/testenv"
)

// buildEnv is a registry with the dev base image in it, and an empty --find-links folder.
func buildEnv(t *testing.T) (registry, base, wheels string) {
	t.Helper()
	registry = testenv.Registry(t)
	return registry, buildtest.PushBase(t, registry), t.TempDir()
}

// buildRequirements builds a job of requirements with b and returns its error.
func buildRequirements(t *testing.T, b *build.LayerBuilder, requirements string) (build.Result, error) {
	t.Helper()
	src := buildtest.Sources(t, "sec", map[string]string{"config.ini": "[owner]\n", "requirements.txt": requirements})
	return b.Build(t.Context(), build.Request{Job: "sec", Version: "v1", PythonVersion: "3.11", Sources: src})
}

// The three attacks of issue 22, with the real pip behind the builder: each is a user
// error naming the line, and none quotes the service's environment or a host file.
// (t.Setenv: not parallel.)
func TestBuildRefusesTheRequirementsAttacksOfIssue22(t *testing.T) {
	const secret = "postgres://datajobs:s3cr3t@db.internal/datajobs"
	t.Setenv("DATAJOBS_DATABASE_URL", secret)
	registry, base, wheels := buildEnv(t)
	buildtest.Wheel(t, wheels, "tinypkg", "1.0")
	marker := filepath.Join(t.TempDir(), "setup-py-ran")
	buildtest.Sdist(t, wheels, "evilpkg", "1.0", marker)
	b := newBuilder(t, registry, base, wheels)
	for _, tc := range []struct{ attack, requirements, want string }{
		{"${VAR} quotes the database URL", "${DATAJOBS_DATABASE_URL}\n", "line 1 is refused"},
		{`\r-r /etc/passwd quotes a host file`, "six\r-r /etc/passwd\r--no-index\n", "line 1 is refused"},
		{`\r--no-binary runs an sdist's build backend on the leader`, "tinypkg\nevilpkg\r--no-binary=:all:\r--find-links=" + wheels + "\n", "line 2 is refused"},
	} {
		_, err := buildRequirements(t, b, tc.requirements)
		require.Error(t, err, tc.attack)
		assert.True(t, build.IsUserError(err), "%s: a user error (not retried): %v", tc.attack, err)
		assert.Contains(t, err.Error(), tc.want, tc.attack)
		assert.NotContains(t, err.Error(), "s3cr3t", tc.attack)
		assert.NotContains(t, err.Error(), "root:x:0", tc.attack)
	}
	assert.NoFileExists(t, marker, "no package code ran")
}

// Defence in depth: even a requirement by name whose only distribution is an sdist never
// has its setup.py run (pip downloads wheels only; the builder installs them itself).
func TestBuildRunsNoCodeOfAPackageThatHasNoWheel(t *testing.T) {
	t.Parallel()
	registry, base, wheels := buildEnv(t)
	marker := filepath.Join(t.TempDir(), "setup-py-ran")
	buildtest.Sdist(t, wheels, "evilpkg", "1.0", marker)
	b := newBuilder(t, registry, base, wheels)
	_, err := buildRequirements(t, b, "evilpkg==1.0\n")
	require.Error(t, err)
	assert.True(t, build.IsUserError(err), "%v", err)
	assert.Contains(t, err.Error(), "evilpkg==1.0")
	assert.NoFileExists(t, marker, "setup.py never ran")
}

// The builder unpacks wheels as `pip install --target` lays them out: the root and
// .data/purelib|platlib|data into site-packages, .data/scripts into bin with "#!python"
// made to run the image's python3, executable bits kept.
func TestBuildUnpacksWheelsAsPipWould(t *testing.T) {
	t.Parallel()
	registry, base, wheels := buildEnv(t)
	buildtest.WheelFiles(t, wheels, "fancy", "2.0", map[string]string{
		"fancy/__init__.py":                     "X = 1\n",
		"fancy/_native.so*":                     "ELF",
		"fancy-2.0.data/purelib/fancy_extra.py": "Y = 2\n",
		"fancy-2.0.data/platlib/fancy_plat.py":  "Z = 3\n",
		"fancy-2.0.data/data/share/fancy.txt":   "data\n",
		"fancy-2.0.data/scripts/fancy-tool":     "#!python\nprint('tool')\n",
	})
	buildtest.Wheel(t, wheels, "tinypkg", "1.0")
	b := newBuilder(t, registry, base, wheels)
	res, err := buildRequirements(t, b, "fancy==2.0\ntinypkg\n")
	require.NoError(t, err)
	headers, contents := files(t, res.Image)
	sp := "/opt/datajobs/site-packages/"
	assert.Equal(t, "X = 1\n", contents[sp+"fancy/__init__.py"])
	assert.Equal(t, "Y = 2\n", contents[sp+"fancy_extra.py"])
	assert.Equal(t, "Z = 3\n", contents[sp+"fancy_plat.py"])
	assert.Equal(t, "data\n", contents[sp+"share/fancy.txt"])
	assert.Equal(t, "#!/usr/bin/env python3\nprint('tool')\n", contents[sp+"bin/fancy-tool"])
	assert.Equal(t, int64(0o755), headers[sp+"bin/fancy-tool"].Mode)
	assert.Equal(t, int64(0o755), headers[sp+"fancy/_native.so"].Mode)
	assert.Equal(t, int64(0o644), headers[sp+"fancy/__init__.py"].Mode)
	assert.Contains(t, contents, sp+"fancy-2.0.dist-info/METADATA")
	assert.Contains(t, contents, sp+"tinypkg/__init__.py")
}

// A requirement set larger than --max-build-bytes fills the leader's disk no more: its
// downloads, or its wheels once unpacked (a zip bomb), are a user error naming the limit.
func TestBuildOverTheByteLimitIsAUserErrorNamingIt(t *testing.T) {
	t.Parallel()
	registry, base, wheels := buildEnv(t)
	noise := make([]byte, 1<<20)
	_, _ = rand.Read(noise)
	buildtest.WheelFiles(t, wheels, "bigpkg", "1.0", map[string]string{"bigpkg/blob.bin": string(noise)})
	buildtest.WheelFiles(t, wheels, "bombpkg", "1.0", map[string]string{"bombpkg/zeros.bin": strings.Repeat("\x00", 8<<20)})
	b := newBuilderWith(t, registry, base, wheels, func(c *build.Config) { c.MaxBuildBytes = 512 << 10 })
	for _, req := range []string{"bigpkg\n", "bombpkg\n"} {
		_, err := buildRequirements(t, b, req)
		require.Error(t, err, req)
		assert.True(t, build.IsUserError(err), "%s: %v", req, err)
		assert.Contains(t, err.Error(), "--max-build-bytes", req)
	}
	_, err := buildRequirements(t, newBuilder(t, registry, base, wheels), "bombpkg\n")
	require.NoError(t, err, "within the default limit it builds")
}

// pip's time and memory are bounded: over either, the build is a user error that names
// the limit, and no pip is left running.
func TestBuildBoundsPipsTimeAndMemory(t *testing.T) {
	t.Parallel()
	registry, base, wheels := buildEnv(t)
	buildtest.Wheel(t, wheels, "tinypkg", "1.0")
	slow := newBuilderWith(t, registry, base, wheels, func(c *build.Config) { c.Pip.Timeout = 10 * time.Millisecond })
	_, err := buildRequirements(t, slow, "tinypkg\n")
	require.Error(t, err)
	assert.True(t, build.IsUserError(err), "%v", err)
	assert.Contains(t, err.Error(), "within 10ms")

	small := newBuilderWith(t, registry, base, wheels, func(c *build.Config) { c.Pip.MemoryBytes = 16 << 20 })
	_, err = buildRequirements(t, small, "tinypkg\n")
	require.Error(t, err)
	assert.True(t, build.IsUserError(err), "%v", err)
	assert.Contains(t, err.Error(), "out of memory")
}
