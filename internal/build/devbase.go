package build

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"runtime"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// devVDK is the dev base image's vdk: it says what it is instead of running a job.
const devVDK = `#!/bin/sh
echo "datajobs dev base image: no python or vdk-core here; point --base-image at a real python image with vdk-core (docs/builder.md)" >&2
exit 1
`

// DevBaseImage is the base image of `datajobs dev` and of the tests, assembled here because
// nothing can be pulled from the internet there. It has the layout of a python base image
// (a passwd entry for uid 1000, a vdk on PATH) but no python: pods of dev mode run on
// kwok's fake node, which never starts containers. Production uses a real python image
// with vdk-core (docs/builder.md). The image is reproducible: the same digest every time.
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
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Created = v1.Time{Time: Epoch}
	cf.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"}
	return mutate.ConfigFile(img, cf)
}

// PushDevBase pushes DevBaseImage to ref (plain HTTP allowed: dev registries are on
// loopback) and returns the reference by digest.
func PushDevBase(ctx context.Context, ref string) (string, error) {
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return "", fmt.Errorf("dev base image: %w", err)
	}
	if !loopback(registryHost(ref)) {
		return "", fmt.Errorf("dev base image: %s is not on a loopback registry", ref)
	}
	img, err := DevBaseImage()
	if err != nil {
		return "", fmt.Errorf("dev base image: %w", err)
	}
	if err := remote.Write(r, img, remote.WithContext(ctx)); err != nil {
		return "", fmt.Errorf("push dev base image to %s: %w", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	return r.Context().Digest(d.String()).String(), nil
}
