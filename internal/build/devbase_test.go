package build_test

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/build"
)

// TestImageFromDirsIsReproducibleAndKeepsModes guards the dev base image's promise (the
// same package lists give the same digest) and what a root file system needs kept: the
// sticky /tmp, executables, symbolic links, root ownership; times are dropped.
func TestImageFromDirsIsReproducibleAndKeepsModes(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "rootfs")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "usr/bin"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "tmp"), 0o755))
	require.NoError(t, os.Chmod(filepath.Join(root, "tmp"), os.ModeSticky|0o777))
	require.NoError(t, os.WriteFile(filepath.Join(root, "usr/bin/python3.11"), []byte("#!/bin/sh\n"), 0o755))
	require.NoError(t, os.Symlink("python3.11", filepath.Join(root, "usr/bin/python3")))

	digest := func() (v1.Hash, v1.Image) {
		img, err := build.ImageFromDirs(t.TempDir(), v1.Config{Entrypoint: []string{"/usr/bin/python3"}}, root)
		require.NoError(t, err)
		d, err := img.Digest()
		require.NoError(t, err)
		return d, img
	}
	first, img := digest()
	// Other times on the same files: the same image.
	require.NoError(t, os.Chtimes(filepath.Join(root, "usr/bin/python3.11"), build.Epoch, build.Epoch.AddDate(5, 0, 0)))
	second, _ := digest()
	require.Equal(t, first, second)

	layers, err := img.Layers()
	require.NoError(t, err)
	require.Len(t, layers, 1)
	rc, err := layers[0].Uncompressed()
	require.NoError(t, err)
	defer rc.Close()
	got := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		got[h.Name] = h
	}
	require.Equal(t, int64(0o1777), got["tmp/"].Mode, "/tmp stays sticky and world-writable")
	require.Equal(t, int64(0o755), got["usr/bin/python3.11"].Mode)
	require.Equal(t, "python3.11", got["usr/bin/python3"].Linkname)
	for name, h := range got {
		require.Zero(t, h.Uid, name)
		require.Equal(t, build.Epoch, h.ModTime.UTC(), name)
	}
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	require.Equal(t, "linux", cf.OS)
	require.Equal(t, []string{"/usr/bin/python3"}, cf.Config.Entrypoint)
}
