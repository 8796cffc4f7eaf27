package build

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/testzip"
)

// Defence in depth below the parser: were a ${VAR} ever to reach pip, pip would expand it
// from its environment, and the real pip does (the control run, with the service's
// environment, quotes the secret). The builder's pip has an environment of its own, so
// the variable expands to nothing. (t.Setenv: not parallel.)
func TestPipHasNoServiceVariableToExpand(t *testing.T) {
	const secret = "postgres://datajobs:s3cr3t@db.internal/datajobs"
	t.Setenv("DATAJOBS_DATABASE_URL", secret)
	var c PipConfig
	cmdline, err := c.pipCommand(t.Context())
	require.NoError(t, err)
	scratch := t.TempDir()
	for _, d := range []string{"home", "tmp", "wheels"} {
		require.NoError(t, os.Mkdir(filepath.Join(scratch, d), 0o700))
	}
	raw := filepath.Join(scratch, "raw.txt")
	require.NoError(t, os.WriteFile(raw, []byte("${DATAJOBS_DATABASE_URL}\n"), 0o600))
	args := append(cmdline[1:], "download", "--isolated", "--no-index", "--dest", filepath.Join(scratch, "wheels"), "-r", raw)

	control := exec.Command(cmdline[0], args...)
	control.Env = os.Environ()
	out, _ := control.CombinedOutput()
	require.Contains(t, string(out), "s3cr3t", "pip expands ${VAR} from its environment (the attack is real)")

	out2, err := c.run(t.Context(), exec.Command(cmdline[0], args...), scratch, time.Minute, 1<<30)
	require.Error(t, err)
	assert.NotContains(t, out2, "s3cr3t")
	assert.NotContains(t, pipFailure(out2).Error(), "s3cr3t")
}

// pip with --only-binary never downloads anything else, but should a folder hold an
// sdist, the builder refuses it: only wheels are installed.
func TestAnArtifactThatIsNotAWheelIsRefused(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"evil-1.0.tar.gz", "evil-1.0.zip", "evil-1.0.egg"} {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644))
		var w wheels
		_, err := w.entries(dir, "site", 1<<20)
		w.close()
		require.Error(t, err, name)
		assert.True(t, IsUserError(err), name)
		assert.Contains(t, err.Error(), "not a wheel", name)
	}
}

// FuzzEveryArchiveTheAPIAcceptsBuilds: the API (service.SourcesVersion) and the builder
// read sources with one zip reader, so any archive the API accepts becomes a sources
// layer, every file under /job.
func FuzzEveryArchiveTheAPIAcceptsBuilds(f *testing.F) {
	for _, files := range [][]testzip.File{
		{{Name: "job/config.ini", Body: "[owner]\n"}, {Name: "job/"}},
		{{Name: "config.ini"}, {Name: "sub\\step.py", Body: "x"}, {Name: "./a//b.sql", Body: "y"}},
		{{Name: "top/a/"}, {Name: "top/a/b", Body: "c"}, {Name: "top/config.ini"}, {Name: "top/run.sh", Body: "#!/bin/sh", Mode: 0o755}},
		{{Name: "job/requirements.txt", Body: "tinypkg==1.0\n"}, {Name: "job/config.ini"}},
		{{Name: "job/a", Body: "file"}, {Name: "job/a/b", Body: "a file under the file"}},
	} {
		f.Add(testzip.New(f, testzip.Options{}, files...))
	}
	cfg := service.SourcesConfig{MaxArchiveBytes: 1 << 20, MaxUncompressedBytes: 1 << 20, MaxFiles: 100}
	f.Fuzz(func(t *testing.T, archive []byte) {
		if _, err := service.SourcesVersion(archive, cfg); err != nil {
			return
		}
		entries, _, err := sourceEntries(archive)
		require.NoError(t, err, "an archive the API accepted")
		files := map[string]bool{}
		for _, e := range entries {
			require.True(t, e.name == "job" || strings.HasPrefix(e.name, "job/"), e.name)
			if !e.dir {
				files[e.name] = true
			}
		}
		for _, e := range entries {
			for d := path.Dir(e.name); d != "."; d = path.Dir(d) {
				require.False(t, files[d], "%s is a file and the folder of %s: no tree to extract", d, e.name)
			}
		}
		_, err = writeLayer(filepath.Join(t.TempDir(), "l.tar.gz"), entries, JobUID, "", 1<<30)
		require.NoError(t, err, "its layer is written")
	})
}
