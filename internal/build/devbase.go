package build

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"

	"github.com/datajobs/datajobs/internal/loopback"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// devVDK is the dev base image's vdk: it says what it is instead of running a job.
const devVDK = `#!/bin/sh
echo "datajobs dev base image: no python or vdk-core here; in dev and the tests only python 3.11 has a real base image: deploy with python_version 3.11, or point --base-image at a real python image with vdk-core (docs/builder.md)" >&2
exit 1
`

// DevBaseImage is the stub base image of the compatibility suite (every python version,
// no run) and of `datajobs dev`'s python 3.11 while hack/base-image has not built the real
// one (dev advertises no other version: it could not run), assembled
// here because nothing can be pulled from the internet there. It has the layout of a python
// base image (a passwd entry for uid 1000, a vdk on PATH) but no python: its vdk says so
// and exits 1. Production uses real python images with vdk-core (docs/builder.md). The
// image is reproducible: the same digest every time.
func DevBaseImage() (v1.Image, error) {
	var buf bytes.Buffer
	files := map[string]string{
		"etc/passwd":        "root:x:0:0:root:/root:/bin/sh\njob:x:1000:1000:data job:/job:/bin/sh\n",
		"etc/group":         "root:x:0:\njob:x:1000:\n",
		"usr/local/bin/vdk": devVDK,
		"etc/datajobs-base": "datajobs dev base image\n",
	}
	var entries []entry
	for n, content := range files {
		mode := int64(0o644)
		if n == "usr/local/bin/vdk" {
			mode = 0o755
		}
		entries = append(entries, entry{
			name: n, mode: mode, size: int64(len(content)),
			open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader([]byte(content))), nil },
		})
	}
	if err := (layerWriter{}).write(&buf, withParents(entries, "")); err != nil {
		return nil, err
	}
	layer, err := layerFromBytes(buf.Bytes(), types.OCILayer)
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{Created: v1.Time{Time: Epoch}, CreatedBy: "datajobs dev base image"}})
	if err != nil {
		return nil, err
	}
	return withBaseConfig(img)
}

// PushDevBase pushes DevBaseImage to ref on a loopback registry and returns the
// reference by digest.
func PushDevBase(ctx context.Context, ref string) (string, error) {
	img, err := DevBaseImage()
	if err != nil {
		return "", fmt.Errorf("dev base image: %w", err)
	}
	return PushImage(ctx, ref, img)
}

// PushImage pushes img to ref on a loopback registry (plain HTTP allowed: dev and test
// registries are on loopback) and returns the reference by digest. A registry that has
// the blobs already receives only the manifest.
func PushImage(ctx context.Context, ref string, img v1.Image) (string, error) {
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return "", fmt.Errorf("push %s: %w", ref, err)
	}
	if !loopback.Host(registryHost(ref)) {
		return "", fmt.Errorf("push %s: not a loopback registry", ref)
	}
	if err := remote.Write(r, img, remote.WithContext(ctx)); err != nil {
		return "", fmt.Errorf("push %s: %w", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	return r.Context().Digest(d.String()).String(), nil
}

// PythonBaseImage builds the dev and test environment's python base image from root file
// system folders, one layer per folder, in order (hack/base-image/build.sh makes them:
// Debian's python3 unpacked from its packages, then vdk-core installed by pip).
func PythonBaseImage(scratch string, dirs ...string) (v1.Image, error) {
	img, err := ImageFromDirs(scratch, v1.Config{}, dirs...)
	if err != nil {
		return nil, err
	}
	return withBaseConfig(img)
}

// ImageFromDirs builds an image of the platform this binary runs on with one layer per
// root file system folder, in order, and config's entrypoint and environment. Files keep
// their modes (so /tmp stays 1777) and are owned by root; times are Epoch, so the same
// folders give the same digest. scratch holds the layer files while the image is in use.
func ImageFromDirs(scratch string, config v1.Config, dirs ...string) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for i, dir := range dirs {
		entries, err := rootfsEntries(dir)
		if err != nil {
			return nil, fmt.Errorf("image layer %s: %w", dir, err)
		}
		layer, err := writeLayer(filepath.Join(scratch, fmt.Sprintf("layer%d.tar.gz", i)), entries, 0, types.OCILayer, math.MaxInt64) // our own folders: no bound
		if err != nil {
			return nil, fmt.Errorf("image layer %s: %w", dir, err)
		}
		img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
			Created: v1.Time{Time: Epoch}, CreatedBy: "datajobs: " + filepath.Base(dir),
		}})
		if err != nil {
			return nil, err
		}
	}
	return withConfig(img, func(c *v1.Config) { c.Entrypoint, c.Env = config.Entrypoint, config.Env })
}

// withBaseConfig gives a base image its platform (containerd matches it against the
// node's) and the environment of a python image.
func withBaseConfig(img v1.Image) (v1.Image, error) {
	return withConfig(img, func(c *v1.Config) { c.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"} })
}

// withConfig gives img what every image assembled here has (linux on this architecture,
// created at Epoch, so that the digest depends on the content only), then set's changes.
func withConfig(img v1.Image, set func(*v1.Config)) (v1.Image, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Created = v1.Time{Time: Epoch}
	set(&cf.Config)
	return mutate.ConfigFile(img, cf)
}

// rootfsEntries lists a root file system folder as layer entries: directories, regular
// files and symbolic links with their permission, setuid, setgid and sticky bits.
func rootfsEntries(dir string) ([]entry, error) {
	var entries []entry
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		e := entry{name: filepath.ToSlash(rel), mode: tarMode(info.Mode())}
		switch {
		case d.IsDir():
			e.dir = true
		case d.Type()&fs.ModeSymlink != 0:
			if e.link, err = os.Readlink(p); err != nil {
				return err
			}
		case d.Type().IsRegular():
			e.size = info.Size()
			e.open = func() (io.ReadCloser, error) { return os.Open(p) }
		default:
			return nil // device nodes, sockets and fifos have no place in an image
		}
		entries = append(entries, e)
		return nil
	})
	return entries, err
}

func tarMode(m fs.FileMode) int64 {
	mode := int64(m.Perm())
	for bit, flag := range map[fs.FileMode]int64{fs.ModeSetuid: 0o4000, fs.ModeSetgid: 0o2000, fs.ModeSticky: 0o1000} {
		if m&bit != 0 {
			mode |= flag
		}
	}
	return mode
}

// WriteLayout writes img as the only image of a new OCI image layout at dir (replacing
// what was there), so that it is built once and pushed at every start.
func WriteLayout(dir string, img v1.Image) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("oci layout %s: %w", dir, err)
	}
	if err := p.AppendImage(img); err != nil {
		return fmt.Errorf("oci layout %s: %w", dir, err)
	}
	return nil
}

// PushLayout pushes the image of the OCI layout at dir (see WriteLayout) to ref on a
// loopback registry and returns the reference by digest.
func PushLayout(ctx context.Context, dir, ref string) (string, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return "", fmt.Errorf("read oci layout %s: %w", dir, err)
	}
	m, err := idx.IndexManifest()
	if err != nil || len(m.Manifests) != 1 {
		return "", fmt.Errorf("oci layout %s: want exactly one image: %w", dir, err)
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		return "", fmt.Errorf("oci layout %s: %w", dir, err)
	}
	return PushImage(ctx, ref, img)
}
