package build_test

import (
	"archive/tar"
	"io"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/build"
	"github.com/datajobs/datajobs/internal/build/buildtest"
	"github.com/datajobs/datajobs/internal/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m)
}

// newBuilder is a layer builder pushing to registry, with base for python 3.11 and pip
// limited to a local folder of wheels (an empty local index: no network).
func newBuilder(t *testing.T, registry, base, wheels string) *build.LayerBuilder {
	t.Helper()
	return newBuilderWith(t, registry, base, wheels, nil)
}

// newBuilderWith is newBuilder with its configuration changed by configure.
func newBuilderWith(t *testing.T, registry, base, wheels string, configure func(*build.Config)) *build.LayerBuilder {
	t.Helper()
	index := t.TempDir()
	cfg := build.Config{
		Registry: registry + "/" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")), Insecure: true,
		BaseImages: map[string]string{"3.11": base},
		Pip:        build.PipConfig{IndexURL: (&url.URL{Scheme: "file", Path: index}).String(), FindLinks: []string{wheels}},
	}
	if configure != nil {
		configure(&cfg)
	}
	b, err := build.NewLayerBuilder(cfg)
	require.NoError(t, err)
	return b
}

// files reads every file of the image's merged filesystem: path → header and content.
func files(t *testing.T, image string) (map[string]*tar.Header, map[string]string) {
	t.Helper()
	ref, err := name.ParseReference(image, name.Insecure)
	require.NoError(t, err)
	img, err := remote.Image(ref)
	require.NoError(t, err)
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	headers, contents := map[string]*tar.Header{}, map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		name := "/" + strings.TrimSuffix(h.Name, "/")
		headers[name] = h
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			require.NoError(t, err)
			contents[name] = string(b)
		}
	}
	return headers, contents
}

func TestBuildPutsSourcesAndRequirementsInARunnableImage(t *testing.T) {
	t.Parallel()
	registry := testenv.Registry(t)
	base := buildtest.PushBase(t, registry)
	wheels := t.TempDir()
	buildtest.Wheel(t, wheels, "tinypkg", "1.0")
	b := newBuilder(t, registry, base, wheels)
	src := buildtest.Sources(t, "my-job", map[string]string{
		"config.ini":       "[owner]\nteam = t\n",
		"10_step.py":       "def run(job_input):\n    import tinypkg\n",
		"sub/helper.sql":   "select 1",
		"requirements.txt": "tinypkg==1.0\n",
	})

	res, err := b.Build(t.Context(), build.Request{Job: "my-job", Version: "v1", PythonVersion: "3.11", Sources: src})
	require.NoError(t, err)
	assert.Contains(t, res.Image, "/my-job@sha256:")
	assert.Positive(t, res.BytesPushed)

	ref, err := name.ParseReference(res.Image, name.Insecure)
	require.NoError(t, err)
	img, err := remote.Image(ref)
	require.NoError(t, err)
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, []string{"vdk", "run", "/job"}, cf.Config.Entrypoint)
	assert.Equal(t, "/job", cf.Config.WorkingDir)
	assert.Equal(t, "1000:1000", cf.Config.User)
	assert.Equal(t, "my-job", cf.Config.Labels["datajobs.io/job"])
	assert.Equal(t, "v1", cf.Config.Labels["datajobs.io/job-version"])
	assert.Equal(t, res.SourceSHA256, cf.Config.Labels["datajobs.io/source-sha256"])
	assert.Contains(t, cf.Config.Env, "PYTHONPATH=/opt/datajobs/site-packages")

	headers, contents := files(t, res.Image)
	// The sources, without vdk's top folder, owned by the pod's user.
	assert.Equal(t, "[owner]\nteam = t\n", contents["/job/config.ini"])
	assert.Equal(t, "select 1", contents["/job/sub/helper.sql"])
	for _, p := range []string{"/job", "/job/sub", "/job/config.ini", "/job/10_step.py"} {
		require.Contains(t, headers, p)
		assert.Equal(t, 1000, headers[p].Uid, p)
		assert.Equal(t, build.Epoch, headers[p].ModTime.UTC(), p)
	}
	// The requirement, installed from its wheel, owned by root.
	assert.Equal(t, "VALUE = \"tinypkg 1.0\"\n", contents["/opt/datajobs/site-packages/tinypkg/__init__.py"])
	assert.Equal(t, 0, headers["/opt/datajobs/site-packages/tinypkg/__init__.py"].Uid)
	// The base image is still there.
	assert.Contains(t, contents, "/usr/local/bin/vdk")
}

func TestBuildIsReproducibleAndPushesOnlyOnce(t *testing.T) {
	t.Parallel()
	registry := testenv.Registry(t)
	base := buildtest.PushBase(t, registry)
	wheels := t.TempDir()
	buildtest.Wheel(t, wheels, "tinypkg", "1.0")
	b := newBuilder(t, registry, base, wheels)
	files := map[string]string{"config.ini": "[owner]\n", "step.py": "print(1)\n", "requirements.txt": "tinypkg\n"}
	req := build.Request{Job: "job-a", Version: "v1", PythonVersion: "3.11", Sources: buildtest.Sources(t, "job-a", files)}

	first, err := b.Build(t.Context(), req)
	require.NoError(t, err)
	// The same files zipped under another top folder (another archive) give the same image.
	req.Sources = buildtest.Sources(t, "elsewhere", files)
	again, err := b.Build(t.Context(), req)
	require.NoError(t, err)
	assert.Equal(t, first.Digest, again.Digest)
	assert.Zero(t, again.BytesPushed, "the registry has every blob already")

	// Another job with the same sources gets its own repository and image.
	req.Job = "job-b"
	other, err := b.Build(t.Context(), req)
	require.NoError(t, err)
	assert.NotEqual(t, first.Digest, other.Digest)
	assert.Contains(t, other.Image, "/job-b@")
	assert.Equal(t, first.SourceSHA256, other.SourceSHA256)

	// Changed sources change the digest.
	files["step.py"] = "print(2)\n"
	req.Job, req.Sources = "job-a", buildtest.Sources(t, "job-a", files)
	changed, err := b.Build(t.Context(), req)
	require.NoError(t, err)
	assert.NotEqual(t, first.Digest, changed.Digest)
}

func TestBuildFailures(t *testing.T) {
	t.Parallel()
	registry := testenv.Registry(t)
	base := buildtest.PushBase(t, registry)
	wheels := t.TempDir()
	buildtest.Wheel(t, wheels, "tinypkg", "1.0")
	b := newBuilder(t, registry, base, wheels)
	for _, tc := range []struct {
		behaviour, requirements, python string
		wantInMessage                   []string
	}{
		{
			behaviour:    "a requirement without a wheel names the requirement and quotes pip",
			requirements: "tinypkg==1.0\nnosuchpkg==2.0\n", python: "3.11",
			wantInMessage: []string{"nosuchpkg==2.0", "pip says: ERROR:"},
		},
		{
			behaviour:    "a version that does not exist names the requirement",
			requirements: "tinypkg==9.9\n", python: "3.11", wantInMessage: []string{"tinypkg==9.9"},
		},
		{
			behaviour:    "a pip option in requirements.txt is refused",
			requirements: "--index-url http://example.com/simple\ntinypkg\n", python: "3.11",
			wantInMessage: []string{"line 1", "pip options are not allowed"},
		},
		{
			behaviour:    "a direct reference is refused",
			requirements: "tinypkg @ file:///etc/passwd\n", python: "3.11", wantInMessage: []string{"direct references"},
		},
		{
			behaviour:    "a python version without a base image names the configured ones",
			requirements: "", python: "3.9", wantInMessage: []string{"python 3.9", "3.11"},
		},
	} {
		t.Run(tc.behaviour, func(t *testing.T) {
			files := map[string]string{"config.ini": "[owner]\n"}
			if tc.requirements != "" {
				files["requirements.txt"] = tc.requirements
			}
			_, err := b.Build(t.Context(), build.Request{Job: "failing", Version: "v1", PythonVersion: tc.python, Sources: buildtest.Sources(t, "failing", files)})
			require.Error(t, err)
			require.True(t, build.IsUserError(err), "a user error: %v", err)
			for _, want := range tc.wantInMessage {
				assert.Contains(t, err.Error(), want)
			}
		})
	}
}

func TestBuildAgainstAStoppedRegistryIsAPlatformError(t *testing.T) {
	t.Parallel()
	reg := testenv.StartRegistry(t)
	base := buildtest.PushBase(t, reg.Addr)
	b := newBuilder(t, reg.Addr, base, t.TempDir())
	require.NoError(t, reg.Stop())
	src := buildtest.Sources(t, "down", map[string]string{"config.ini": "[owner]\n"})
	_, err := b.Build(t.Context(), build.Request{Job: "down", Version: "v1", PythonVersion: "3.11", Sources: src})
	require.Error(t, err)
	assert.False(t, build.IsUserError(err), "retried as a platform error: %v", err)
}

func TestInsecureIsOnlyForLoopback(t *testing.T) {
	t.Parallel()
	_, err := build.NewLayerBuilder(build.Config{Registry: "registry.example.com/datajobs", Insecure: true, BaseImages: map[string]string{"3.11": "python:3.11"}})
	require.ErrorContains(t, err, "loopback")
	_, err = build.NewLayerBuilder(build.Config{Registry: "127.0.0.1:5000/datajobs", Insecure: true, BaseImages: map[string]string{"3.11": "python:3.11"}})
	require.NoError(t, err)
}
