package build

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/datajobs/datajobs/internal/loopback"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Image labels of every built image.
const (
	LabelJob          = "datajobs.io/job"
	LabelJobVersion   = "datajobs.io/job-version"
	LabelSourceSHA256 = "datajobs.io/source-sha256"
)

// Entrypoint runs the job the way VDK's job images do: vdk-core (in the base image) runs
// the job directory's steps.
var Entrypoint = []string{"vdk", "run", JobDir}

// Config configures a LayerBuilder.
type Config struct {
	// Registry is where images go: <Registry>/<job>@sha256:… Required.
	Registry string
	// BaseImages maps a python version to its base image reference (--base-image
	// 3.11=<ref>). The base brings python and vdk-core. At least one is required.
	BaseImages map[string]string
	// Insecure allows plain HTTP to Registry and to base images of the same host; only
	// for a loopback registry.
	Insecure bool
	// Keychain supplies registry credentials (default: anonymous). See AuthFileKeychain.
	Keychain authn.Keychain
	// Platform picks the base image of a multi-platform index (default linux/amd64).
	Platform v1.Platform
	// Pip resolves requirements.
	Pip PipConfig
	// TempDir holds each build's scratch folder (default os.TempDir()).
	TempDir string
	// MaxBuildBytes bounds the disk of one build: pip's downloads and the requirements
	// layer, unpacked and compressed (default DefaultMaxBuildBytes). A build over it is a
	// user error naming the limit.
	MaxBuildBytes int64
	// Transport is the HTTP transport to registries (default remote.DefaultTransport).
	Transport http.RoundTripper
}

// DefaultMaxBuildBytes is Config.MaxBuildBytes's default (--max-build-bytes).
const DefaultMaxBuildBytes = 2 << 30

// LayerBuilder builds images in-process with go-containerregistry: the base image's
// layers are never downloaded, only its manifest and config; the new layers are written
// once to a scratch folder and pushed.
type LayerBuilder struct {
	cfg   Config
	bases map[string]name.Reference
	opts  []name.Option
}

// NewLayerBuilder checks cfg and returns a builder.
func NewLayerBuilder(cfg Config) (*LayerBuilder, error) {
	if cfg.Registry == "" {
		return nil, fmt.Errorf("builder: the image registry is required")
	}
	if len(cfg.BaseImages) == 0 {
		return nil, fmt.Errorf("builder: at least one base image is required (--base-image <python version>=<image>)")
	}
	var opts []name.Option
	if cfg.Insecure {
		if !loopback.Host(registryHost(cfg.Registry)) {
			return nil, fmt.Errorf("builder: --registry-insecure is only for a registry on a loopback address, not %q", cfg.Registry)
		}
		opts = append(opts, name.Insecure)
	}
	if _, err := name.NewRepository(strings.TrimSuffix(cfg.Registry, "/")+"/job", opts...); err != nil {
		return nil, fmt.Errorf("builder: image registry %q: %w", cfg.Registry, err)
	}
	bases := map[string]name.Reference{}
	for py, ref := range cfg.BaseImages {
		var o []name.Option
		if cfg.Insecure && loopback.Host(registryHost(ref)) {
			o = opts
		}
		r, err := name.ParseReference(ref, o...)
		if err != nil {
			return nil, fmt.Errorf("builder: base image of python %s: %w", py, err)
		}
		bases[py] = r
	}
	cfg.Keychain = cmp.Or[authn.Keychain](cfg.Keychain, authn.NewMultiKeychain())
	if cfg.Platform.OS == "" {
		cfg.Platform = v1.Platform{OS: "linux", Architecture: "amd64"}
	}
	if cfg.Transport == nil {
		cfg.Transport = remote.DefaultTransport
	}
	if cfg.MaxBuildBytes <= 0 {
		cfg.MaxBuildBytes = DefaultMaxBuildBytes
	}
	return &LayerBuilder{cfg: cfg, bases: bases, opts: opts}, nil
}

// BaseImage returns the configured base image reference of a python version, or "".
func (b *LayerBuilder) BaseImage(python string) string {
	if r, ok := b.bases[python]; ok {
		return r.String()
	}
	return ""
}

func (b *LayerBuilder) remoteOptions(ctx context.Context) []remote.Option {
	return []remote.Option{
		remote.WithContext(ctx), remote.WithAuthFromKeychain(b.cfg.Keychain),
		remote.WithTransport(b.cfg.Transport), remote.WithPlatform(b.cfg.Platform),
		remote.WithUserAgent("datajobs-builder"),
	}
}

// base is a resolved base image.
type base struct {
	ref       name.Reference
	img       v1.Image
	digest    v1.Hash
	config    *v1.ConfigFile
	layerType types.MediaType
}

// resolveBase reads the manifest and config of the base image of a python version.
func (b *LayerBuilder) resolveBase(ctx context.Context, python string) (base, error) {
	ref, ok := b.bases[python]
	if !ok {
		return base{}, userErrorf("no base image is configured for python %s (configured: %s); deploy with one of those python versions",
			python, strings.Join(slices.Sorted(maps.Keys(b.bases)), ", "))
	}
	bs := base{ref: ref, layerType: types.DockerLayer}
	var err error
	if bs.img, err = remote.Image(ref, b.remoteOptions(ctx)...); err != nil {
		return base{}, fmt.Errorf("read base image %s: %w", ref, err)
	}
	if bs.digest, err = bs.img.Digest(); err != nil {
		return base{}, fmt.Errorf("read base image %s: %w", ref, err)
	}
	if bs.config, err = bs.img.ConfigFile(); err != nil {
		return base{}, fmt.Errorf("read base image config %s: %w", ref, err)
	}
	mt, err := bs.img.MediaType()
	if err != nil {
		return base{}, fmt.Errorf("read base image %s: %w", ref, err)
	}
	if mt == types.OCIManifestSchema1 {
		bs.layerType = types.OCILayer
	}
	return bs, nil
}

// Build implements Builder.
func (b *LayerBuilder) Build(ctx context.Context, req Request) (Result, error) {
	bs, err := b.resolveBase(ctx, req.PythonVersion)
	if err != nil {
		return Result{}, err
	}
	repo, err := name.NewRepository(strings.TrimSuffix(b.cfg.Registry, "/")+"/"+req.Job, b.opts...)
	if err != nil {
		return Result{}, userErrorf("job name %q is not a valid image repository name: %v", req.Job, err)
	}
	tmp, err := os.MkdirTemp(b.cfg.TempDir, "datajobs-build-")
	if err != nil {
		return Result{}, fmt.Errorf("scratch folder: %w", err)
	}
	defer os.RemoveAll(tmp)
	var whl wheels
	defer whl.close()

	entries, requirements, err := sourceEntries(req.Sources)
	if err != nil {
		return Result{}, err
	}
	sources, err := writeLayer(filepath.Join(tmp, "sources.tar.gz"), entries, JobUID, bs.layerType, maxSourcesUncompressed)
	if err != nil {
		return Result{}, fmt.Errorf("sources layer: %w", err)
	}
	sourceDiff, err := sources.DiffID()
	if err != nil {
		return Result{}, fmt.Errorf("sources layer: %w", err)
	}
	res := Result{BaseImage: bs.ref.String(), BaseDigest: bs.digest.String(), SourceSHA256: sourceDiff.Hex}
	adds := []mutate.Addendum{{Layer: sources, History: v1.History{Created: v1.Time{Time: Epoch}, CreatedBy: "datajobs: job sources in " + JobDir, Comment: req.Version}}}
	env := slices.Clone(bs.config.Config.Env)
	if requirements != nil {
		sum := sha256.Sum256(requirements)
		res.RequirementsSHA256 = hex.EncodeToString(sum[:])
		arch := cmp.Or(bs.config.Architecture, b.cfg.Platform.Architecture)
		layer, err := b.requirementsLayer(ctx, &whl, requirements, req.PythonVersion, arch, tmp, bs.layerType)
		if err != nil {
			return Result{}, err
		}
		if layer != nil {
			adds = append(adds, mutate.Addendum{Layer: layer, History: v1.History{Created: v1.Time{Time: Epoch}, CreatedBy: "datajobs: requirements.txt in " + SitePackages}})
			env = withPythonPath(env)
		}
	}
	img, err := b.image(bs, adds, req, sourceDiff.Hex, env)
	if err != nil {
		return Result{}, err
	}
	digest, err := img.Digest()
	if err != nil {
		return Result{}, fmt.Errorf("image digest: %w", err)
	}
	ref := repo.Digest(digest.String())
	pushed, err := b.push(ctx, ref, img)
	if err != nil {
		return Result{}, fmt.Errorf("push %s: %w", ref, err)
	}
	res.Image, res.Digest, res.BytesPushed = ref.String(), digest.String(), pushed
	return res, nil
}

// requirementsLayer parses requirements.txt, has pip download the wheels and writes them
// unpacked as a layer under SitePackages, all within the build's byte budget. It returns
// nil when the file lists no requirement.
func (b *LayerBuilder) requirementsLayer(ctx context.Context, whl *wheels, requirements []byte, python, arch, tmp string, mt types.MediaType) (v1.Layer, error) {
	reqs, err := ParseRequirements(requirements)
	if err != nil || len(reqs) == 0 {
		return nil, err
	}
	budget := b.cfg.MaxBuildBytes
	dir, err := b.cfg.Pip.pipDownload(ctx, reqs, python, arch, filepath.Join(tmp, "pip"), budget)
	if err != nil {
		return nil, err
	}
	downloaded, err := diskUsage(dir)
	if err != nil {
		return nil, fmt.Errorf("requirements: %w", err)
	}
	if downloaded > budget {
		return nil, userErrorf("the requirements need more than %d bytes of downloads, the limit of a build (--max-build-bytes)", budget)
	}
	entries, err := whl.entries(dir, strings.TrimPrefix(SitePackages, "/"), budget-downloaded)
	if errors.Is(err, errWheelsTooLarge) {
		return nil, userErrorf("the requirements' wheels (%d bytes) hold more than the limit of a build once unpacked, %d bytes with them (--max-build-bytes)", downloaded, budget)
	}
	if err != nil {
		return nil, err
	}
	layer, err := writeLayer(filepath.Join(tmp, "requirements.tar.gz"), entries, 0, mt, budget-downloaded)
	if errors.Is(err, errLayerTooLarge) {
		return nil, userErrorf("the requirements layer is larger than %d bytes with the wheels it was unpacked from, the limit of a build (--max-build-bytes)", budget)
	}
	if err != nil {
		return nil, fmt.Errorf("requirements layer: %w", err)
	}
	return layer, nil
}

// image is the base with the new layers, configured to run the job.
func (b *LayerBuilder) image(bs base, adds []mutate.Addendum, req Request, sourceSHA string, env []string) (v1.Image, error) {
	img, err := mutate.Append(bs.img, adds...)
	if err != nil {
		return nil, fmt.Errorf("append layers: %w", err)
	}
	cfg := *bs.config.Config.DeepCopy()
	cfg.Entrypoint, cfg.Cmd = slices.Clone(Entrypoint), nil
	cfg.WorkingDir = JobDir
	cfg.User = fmt.Sprintf("%d:%d", JobUID, JobUID)
	cfg.Env = env
	cfg.Labels = maps.Clone(cfg.Labels)
	if cfg.Labels == nil {
		cfg.Labels = map[string]string{}
	}
	cfg.Labels[LabelJob] = req.Job
	cfg.Labels[LabelJobVersion] = req.Version
	cfg.Labels[LabelSourceSHA256] = sourceSHA
	if img, err = mutate.Config(img, cfg); err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	if img, err = mutate.CreatedAt(img, v1.Time{Time: Epoch}); err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	return img, nil
}

// push writes img and reports the bytes of the blobs it uploaded (blobs the registry has
// already are neither read nor sent).
func (b *LayerBuilder) push(ctx context.Context, ref name.Reference, img v1.Image) (int64, error) {
	updates := make(chan v1.Update, 16)
	var (
		wg       sync.WaitGroup
		complete int64
	)
	wg.Go(func() {
		for u := range updates {
			complete = max(complete, u.Complete)
		}
	})
	err := remote.Write(ref, img, append(b.remoteOptions(ctx), remote.WithProgress(updates))...)
	wg.Wait()
	return complete, err
}

// errLayerTooLarge is writeLayer's answer to a layer over its limit.
var errLayerTooLarge = errors.New("the layer is over its size limit")

// writeLayer writes entries as a reproducible gzipped tar at file, at most limit bytes,
// and opens it as a layer.
func writeLayer(file string, entries []entry, uid int, mt types.MediaType, limit int64) (v1.Layer, error) {
	f, err := os.Create(file)
	if err != nil {
		return nil, err
	}
	if err := (layerWriter{uid: uid}).write(&limitWriter{w: f, left: limit}, entries); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return os.Open(file) }, tarball.WithMediaType(mt))
}

// limitWriter fails with errLayerTooLarge once more than left bytes are written.
type limitWriter struct {
	w    io.Writer
	left int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > l.left {
		return 0, errLayerTooLarge
	}
	l.left -= int64(len(p))
	return l.w.Write(p)
}

// layerFromBytes opens a gzipped tar in memory as a layer.
func layerFromBytes(b []byte, mt types.MediaType) (v1.Layer, error) {
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }, tarball.WithMediaType(mt))
}

// withPythonPath puts SitePackages first on the image's PYTHONPATH.
func withPythonPath(env []string) []string {
	for i, e := range env {
		if v, ok := strings.CutPrefix(e, "PYTHONPATH="); ok {
			env[i] = "PYTHONPATH=" + SitePackages
			if v != "" {
				env[i] += ":" + v
			}
			return env
		}
	}
	return append(env, "PYTHONPATH="+SitePackages)
}

// registryHost is the host of an image reference or registry prefix, without the port.
func registryHost(ref string) string {
	host, _, _ := strings.Cut(ref, "/")
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return host
}
