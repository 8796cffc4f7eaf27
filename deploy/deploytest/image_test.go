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

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/testenv"
)

// The image `make image` builds, pushed to the environment's registry (CNCF
// Distribution) and read back from it: it runs datajobs serve as a non-root user, carries
// the OCI labels, holds a static binary that runs, and a second build of the same
// commit has the same digest.
func TestImageIsNonRootReproducibleAndLabelled(t *testing.T) {
	t.Parallel()
	cfg := testImage
	first, err := buildImage(t.Context())
	require.NoError(t, err)
	second, err := buildImage(t.Context())
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

	files, err := imageFiles(pulled)
	require.NoError(t, err)
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
func imageFiles(img v1.Image) (map[string]string, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	files := map[string]string{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			return nil, err
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, err
			}
			var b bytes.Buffer
			if _, err := io.Copy(&b, tr); err != nil {
				return nil, err
			}
			files[strings.TrimPrefix(h.Name, "/")] = b.String()
		}
		if err := rc.Close(); err != nil {
			return nil, err
		}
	}
	return files, nil
}
