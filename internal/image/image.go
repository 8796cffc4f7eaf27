// Package image builds the container image of datajobs itself, without a Docker daemon:
// a static binary compiled here (CGO off, -trimpath, fixed ldflags) in one layer on a base
// assembled from nothing (an /etc/passwd and /etc/group naming the non-root user, and an
// empty /tmp), or on a base image the caller gives. Every timestamp is the commit's, every
// tar entry is sorted with fixed owners and modes, so the same commit and Go toolchain
// give the same digest. CA certificates need no file: the binary embeds Mozilla's roots as
// a fallback (golang.org/x/crypto/x509roots/fallback), used when the system has none.
package image

import (
	"archive/tar"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Paths and identity inside the image.
const (
	// BinaryPath is where the datajobs binary is.
	BinaryPath = "/usr/local/bin/datajobs"
	// UID is the non-root user (and group) the image runs as: distroless's "nonroot".
	UID = 65532
	// Source is the default org.opencontainers.image.source label.
	Source = "https://github.com/datajobs/datajobs"
)

// Config says what to build.
type Config struct {
	// Dir is the module root holding cmd/datajobs.
	Dir string
	// Version goes into `datajobs version` and the version label (default "dev").
	Version string
	// Revision is the commit, for the revision label.
	Revision string
	// Created is the time of every layer, history entry and the config (the commit time,
	// so that the digest depends on the commit only). Default: the Unix epoch.
	Created time.Time
	// Source is the source label (default Source).
	Source string
	// Arch is the GOARCH of the binary and the image (default amd64).
	Arch string
	// Base is the image to build on; nil builds from nothing (passwd, group, /tmp).
	Base v1.Image
	// GoCommand runs the Go toolchain (default "go").
	GoCommand string
}

// Build compiles datajobs and assembles its image.
func Build(ctx context.Context, cfg Config) (v1.Image, error) {
	cfg.Version = cmp.Or(cfg.Version, "dev")
	cfg.Source = cmp.Or(cfg.Source, Source)
	cfg.Arch = cmp.Or(cfg.Arch, "amd64")
	cfg.GoCommand = cmp.Or(cfg.GoCommand, "go")
	if cfg.Created.IsZero() {
		cfg.Created = time.Unix(0, 0)
	}
	cfg.Created = cfg.Created.UTC()
	tmp, err := os.MkdirTemp("", "datajobs-image-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "datajobs")
	if err := compile(ctx, cfg, bin); err != nil {
		return nil, err
	}
	binary, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	return Assemble(cfg, binary)
}

// compile builds a static, reproducible binary: no cgo, no paths of this machine, no VCS
// stamp or build ID that would differ between two builds of the same sources.
func compile(ctx context.Context, cfg Config, out string) error {
	ldflags := "-s -w -buildid= -X github.com/datajobs/datajobs/internal/cli.Version=" + cfg.Version
	cmd := exec.CommandContext(ctx, cfg.GoCommand, "build", "-trimpath", "-buildvcs=false",
		"-ldflags", ldflags, "-o", out, "./cmd/datajobs")
	cmd.Dir = cfg.Dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+cfg.Arch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build datajobs: %w: %s", err, bytes.TrimSpace(b))
	}
	return nil
}

// Assemble puts binary into the image: the base layer (when cfg.Base is nil), the binary
// layer, the user, entrypoint and labels.
func Assemble(cfg Config, binary []byte) (v1.Image, error) {
	cfg.Source = cmp.Or(cfg.Source, Source)
	cfg.Arch = cmp.Or(cfg.Arch, "amd64")
	at := v1.Time{Time: cfg.Created.UTC()}
	img := cfg.Base
	var adds []mutate.Addendum
	if img == nil {
		img = mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
		passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:datajobs:/home/nonroot:/sbin/nologin\n", UID, UID)
		group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", UID)
		base, err := layer(cfg.Created, []file{
			{name: "etc/", mode: 0o755, dir: true},
			{name: "etc/group", mode: 0o644, content: []byte(group)},
			{name: "etc/passwd", mode: 0o644, content: []byte(passwd)},
			{name: "home/", mode: 0o755, dir: true},
			{name: "home/nonroot/", mode: 0o700, dir: true, owner: UID},
			{name: "tmp/", mode: 0o1777, dir: true},
		})
		if err != nil {
			return nil, err
		}
		adds = append(adds, mutate.Addendum{Layer: base, History: v1.History{Created: at, CreatedBy: "datajobs base: passwd, group, /tmp"}})
	}
	bin, err := layer(cfg.Created, []file{
		{name: "usr/", mode: 0o755, dir: true},
		{name: "usr/local/", mode: 0o755, dir: true},
		{name: "usr/local/bin/", mode: 0o755, dir: true},
		{name: strings.TrimPrefix(BinaryPath, "/"), mode: 0o755, content: binary},
	})
	if err != nil {
		return nil, err
	}
	adds = append(adds, mutate.Addendum{Layer: bin, History: v1.History{Created: at, CreatedBy: "datajobs " + cfg.Version}})
	img, err = mutate.Append(img, adds...)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", cfg.Arch
	cf.Created = at
	c := &cf.Config
	c.User = fmt.Sprintf("%d:%d", UID, UID)
	c.Entrypoint = []string{BinaryPath, "serve"}
	c.Cmd = nil
	c.WorkingDir = "/"
	if len(c.Env) == 0 {
		c.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	}
	c.Labels = mergeLabels(c.Labels, map[string]string{
		"org.opencontainers.image.title":       "datajobs",
		"org.opencontainers.image.description": "Control service for data jobs on Kubernetes",
		"org.opencontainers.image.source":      cfg.Source,
		"org.opencontainers.image.revision":    cfg.Revision,
		"org.opencontainers.image.version":     cfg.Version,
		"org.opencontainers.image.created":     cfg.Created.UTC().Format(time.RFC3339),
		"org.opencontainers.image.licenses":    "Apache-2.0",
	})
	return mutate.ConfigFile(img, cf)
}

func mergeLabels(base, over map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

// file is one tar entry of a layer; entries are written in the order given.
type file struct {
	name    string
	mode    int64
	dir     bool
	owner   int
	content []byte
}

// layer writes files as a reproducible tar layer: fixed times, numeric owners, no user
// or group names, entries in the given (sorted) order.
func layer(at time.Time, files []file) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{
			Name: f.name, Mode: f.mode, ModTime: at, Uid: f.owner, Gid: f.owner,
			Typeflag: tar.TypeReg, Size: int64(len(f.content)), Format: tar.FormatPAX,
		}
		if f.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.content); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
