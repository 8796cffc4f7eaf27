package deploytest

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/devenv"
	"github.com/datajobs/datajobs/internal/image"
	"github.com/datajobs/datajobs/internal/testenv"
)

// The image `make image` builds, pushed to the environment's registry (CNCF
// Distribution) and read back from it: it runs datajobs serve as a non-root user, carries
// the OCI labels, holds a static binary that runs, and a second build of the same
// commit has the same digest.
func TestImageIsNonRootReproducibleAndLabelled(t *testing.T) {
	t.Parallel()
	root, err := devenv.RepoRoot()
	require.NoError(t, err)
	cfg := image.Config{
		Dir: root, Version: "v9.9.9-test", Revision: "0123456789abcdef0123456789abcdef01234567",
		Created: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC),
	}
	first, err := image.Build(t.Context(), cfg)
	require.NoError(t, err)
	second, err := image.Build(t.Context(), cfg)
	require.NoError(t, err)
	d1, err := first.Digest()
	require.NoError(t, err)
	d2, err := second.Digest()
	require.NoError(t, err)
	require.Equal(t, d1, d2, "the same commit gives the same digest")

	ref, err := name.ParseReference(testenv.Registry(t)+"/deploytest/datajobs:v9.9.9-test", name.Insecure)
	require.NoError(t, err)
	require.NoError(t, remote.Write(ref, first, remote.WithContext(t.Context())))
	pulled, err := remote.Image(ref, remote.WithContext(t.Context()))
	require.NoError(t, err)
	d3, err := pulled.Digest()
	require.NoError(t, err)
	require.Equal(t, d1, d3)

	cf, err := pulled.ConfigFile()
	require.NoError(t, err)
	require.Equal(t, "65532:65532", cf.Config.User, "non-root, numeric (runAsNonRoot can check it)")
	require.Equal(t, []string{"/usr/local/bin/datajobs", "serve"}, cf.Config.Entrypoint)
	require.Equal(t, "linux", cf.OS)
	require.Equal(t, "amd64", cf.Architecture)
	require.Equal(t, cfg.Created, cf.Created.UTC())
	for k, v := range map[string]string{
		"org.opencontainers.image.source":   "https://github.com/datajobs/datajobs",
		"org.opencontainers.image.revision": cfg.Revision,
		"org.opencontainers.image.version":  cfg.Version,
	} {
		require.Equal(t, v, cf.Config.Labels[k], k)
	}

	files := imageFiles(t, pulled)
	require.Contains(t, files["etc/passwd"], "nonroot:x:65532:65532:")
	require.Contains(t, files, "tmp/")
	bin := filepath.Join(t.TempDir(), "datajobs")
	require.NoError(t, os.WriteFile(bin, []byte(files["usr/local/bin/datajobs"]), 0o755))
	f, err := elf.Open(bin)
	require.NoError(t, err)
	for _, p := range f.Progs {
		require.NotEqual(t, elf.PT_INTERP, p.Type, "a static binary has no dynamic loader")
	}
	require.NoError(t, f.Close())
	out, err := exec.CommandContext(t.Context(), bin, "version").Output()
	require.NoError(t, err)
	require.Equal(t, "datajobs v9.9.9-test\n", string(out))
}

// imageFiles reads every regular file and directory of the image's layers, by path.
func imageFiles(t *testing.T, img v1.Image) map[string]string {
	t.Helper()
	layers, err := img.Layers()
	require.NoError(t, err)
	files := map[string]string{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		require.NoError(t, err)
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
			var b bytes.Buffer
			_, err = io.Copy(&b, tr)
			require.NoError(t, err)
			files[strings.TrimPrefix(h.Name, "/")] = b.String()
		}
		require.NoError(t, rc.Close())
	}
	return files
}
