package synchronizer_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/build"
	"github.com/datajobs/datajobs/internal/build/buildtest"
	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/synchronizer"
	"github.com/datajobs/datajobs/internal/testenv"
)

// builds is a fixture's synchronizer with the layer builder, pushing to a real registry.
type builds struct {
	*fixture
	registry string // host:port
	prefix   string // <registry>/<namespace>: the --image-registry
	wheels   string // the --find-links folder
	base     string // the base image of python 3.11
	metrics  *prometheus.Registry
}

func newBuilds(t testing.TB, registry string) *builds {
	t.Helper()
	return newBuildsWith(t, registry, nil)
}

// newBuildsWith is newBuilds with cfg's synchronizer configuration changed by configure.
func newBuildsWith(t testing.TB, registry string, configure func(*synchronizer.Config)) *builds {
	t.Helper()
	f := newFixture(t)
	base := buildtest.PushBase(t, registry)
	wheels := t.TempDir()
	buildtest.Wheel(t, wheels, "tinypkg", "1.0")
	b := &builds{fixture: f, registry: registry, prefix: registry + "/" + f.ns, wheels: wheels, base: base, metrics: prometheus.NewRegistry()}
	f.render.ImageRegistry = b.prefix
	bm := synchronizer.NewBuildMetrics(b.metrics)
	lb, err := build.NewLayerBuilder(build.Config{
		Registry: b.prefix, Insecure: true, BaseImages: map[string]string{"3.11": base},
		Transport: bm.Transport(remote.DefaultTransport),
		Pip:       build.PipConfig{IndexURL: (&url.URL{Scheme: "file", Path: t.TempDir()}).String(), FindLinks: []string{wheels}},
	})
	require.NoError(t, err)
	cfg := synchronizer.Config{
		Render: f.render, Settings: controller.Settings{Workers: 4, Interval: time.Hour},
		RetryBase: 50 * time.Millisecond, RetryMax: 500 * time.Millisecond,
		Build: synchronizer.BuildConfig{Builder: lb, Store: f.db, Metrics: bm},
	}
	if configure != nil {
		configure(&cfg)
	}
	s := synchronizer.New(cfg, f.db, f.client, f.applier)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Run(ctx, f.epoch)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return b
}

// upload stores sources of job name and returns their version.
func (b *builds) upload(name string, files map[string]string) string {
	b.t.Helper()
	v, err := b.svc.UploadSources(b.t.Context(), team, name, buildtest.Sources(b.t, name, files), "test", "alice")
	require.NoError(b.t, err)
	return v
}

func (b *builds) image(name string) string {
	cj := b.cronJob(name)
	if cj == nil {
		return ""
	}
	return cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image
}

// builtImage waits for the job's CronJob to run an image built for version, and returns it.
func (b *builds) builtImage(name, version string) string {
	b.t.Helper()
	b.synced(name)
	var image string
	b.eventually(func() bool {
		image = b.image(name)
		return strings.HasPrefix(image, b.prefix+"/"+name+"@sha256:") && b.cronJob(name).Annotations["datajobs.io/job-version"] == version
	}, "CronJob of "+name+" on the image of "+version)
	return image
}

// counter reads a counter of the build metrics (0 when it was never incremented).
func (b *builds) counter(metric string, label ...string) float64 {
	b.t.Helper()
	families, err := b.metrics.Gather()
	require.NoError(b.t, err)
	total := 0.0
	for _, f := range families {
		if f.GetName() != metric {
			continue
		}
		for _, m := range f.GetMetric() {
			if matches(m, label) {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

func matches(m *dto.Metric, label []string) bool {
	if len(label) == 0 {
		return true
	}
	for _, l := range m.GetLabel() {
		if l.GetName() == label[0] && l.GetValue() == label[1] {
			return true
		}
	}
	return false
}

// registryRequests counts every request of the builder to a registry.
func (b *builds) registryRequests() float64 {
	return b.counter("datajobs_build_registry_requests_total")
}

func labels(t *testing.T, image string) map[string]string {
	t.Helper()
	ref, err := name.ParseReference(image, name.Insecure)
	require.NoError(t, err)
	img, err := remote.Image(ref)
	require.NoError(t, err)
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	return cf.Config.Labels
}

func TestBuildDeployRunsTheBuiltImageByDigestAndNeverBuildsItAgain(t *testing.T) {
	t.Parallel()
	b := newBuilds(t, testenv.Registry(t))
	b.createJob("built-job")
	v := b.upload("built-job", map[string]string{"config.ini": "[owner]\n", "step.py": "import tinypkg\n", "requirements.txt": "tinypkg==1.0\n"})
	b.deploy("built-job", job.DeploymentChange{JobVersion: ptr(v), PythonVersion: ptr("3.11")})

	image := b.builtImage("built-job", v)
	// The digest exists in the registry and is this job's version.
	l := labels(t, image)
	assert.Equal(t, "built-job", l["datajobs.io/job"])
	assert.Equal(t, v, l["datajobs.io/job-version"])
	require.InDelta(t, 1, b.counter("datajobs_build_builds_total", "result", "ok"), 0)
	assert.Positive(t, b.counter("datajobs_build_pushed_bytes_total"))

	// A change of the same version (schedule) and a redeploy: no build, no registry request, same digest.
	requests := b.registryRequests()
	b.patch("built-job", job.DeploymentChange{Schedule: ptr("0 3 * * *")})
	b.eventually(func() bool { return b.cronJob("built-job").Spec.Schedule == "0 3 * * *" }, "new schedule applied")
	b.synced("built-job")
	b.deploy("built-job", job.DeploymentChange{JobVersion: ptr(v), PythonVersion: ptr("3.11"), Enabled: ptr(false)})
	b.eventually(func() bool { return *b.cronJob("built-job").Spec.Suspend }, "disabled")
	assert.Equal(t, image, b.image("built-job"))
	assert.InDelta(t, requests, b.registryRequests(), 0, "no registry request for a version already built")
	assert.InDelta(t, 1, b.counter("datajobs_build_builds_total"), 0)
	assert.Positive(t, b.counter("datajobs_build_cache_hits_total"))
}

func TestBuildJobsWithIdenticalSourcesShareNoTag(t *testing.T) {
	t.Parallel()
	b := newBuilds(t, testenv.Registry(t))
	files := map[string]string{"config.ini": "[owner]\n", "step.py": "print('same')\n"}
	images := map[string]string{}
	for _, n := range []string{"twin-one", "twin-two"} {
		b.createJob(n)
		v := b.upload(n, files)
		b.deploy(n, job.DeploymentChange{JobVersion: ptr(v), PythonVersion: ptr("3.11")})
		images[n] = b.builtImage(n, v)
	}
	assert.NotEqual(t, images["twin-one"], images["twin-two"])
	for n := range images {
		repo, err := name.NewRepository(b.prefix+"/"+n, name.Insecure)
		require.NoError(t, err)
		// Distribution answers 404 NAME_UNKNOWN to the tag list of a repository without tags.
		tags, err := remote.List(repo)
		var terr *transport.Error
		if errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound {
			err = nil
		}
		require.NoError(t, err)
		assert.Empty(t, tags, "images are pushed by digest only: no mutable tag in %s", n)
		_, err = remote.Head(repo.Digest(strings.SplitN(images[n], "@", 2)[1]))
		require.NoError(t, err, "the image is in its repository by digest")
	}
}

func TestBuildOfAPrebuiltVersionKeepsTheTaggedImage(t *testing.T) {
	t.Parallel()
	b := newBuilds(t, testenv.Registry(t))
	b.createJob("prebuilt")
	b.deploy("prebuilt", job.DeploymentChange{JobVersion: ptr("release-7"), PythonVersion: ptr("3.11")})
	b.synced("prebuilt")
	assert.Equal(t, b.prefix+"/prebuilt:release-7", b.image("prebuilt"))
	assert.Zero(t, b.registryRequests())
}

func TestBuildUserErrorKeepsTheLastGoodImageUntilANewDeploy(t *testing.T) {
	t.Parallel()
	b := newBuilds(t, testenv.Registry(t))
	b.createJob("bad-reqs")
	good := b.upload("bad-reqs", map[string]string{"config.ini": "[owner]\n", "requirements.txt": "tinypkg\n"})
	b.deploy("bad-reqs", job.DeploymentChange{JobVersion: ptr(good), PythonVersion: ptr("3.11")})
	goodImage := b.builtImage("bad-reqs", good)

	bad := b.upload("bad-reqs", map[string]string{"config.ini": "[owner]\n", "requirements.txt": "tinypkg\nnowheel==1.2\n"})
	b.deploy("bad-reqs", job.DeploymentChange{JobVersion: ptr(bad)})
	var d *job.Deployment
	b.eventually(func() bool {
		d = b.state("bad-reqs").Desired
		return d.Status == job.StatusUserError
	}, "user_error recorded")
	assert.Contains(t, d.Message, "nowheel==1.2")
	assert.Contains(t, d.Message, "pip says")
	assert.Contains(t, d.Message, "redeploy (vdk deploy) to retry", "the message says how to retry")
	assert.Equal(t, goodImage, b.image("bad-reqs"), "the CronJob keeps the last good image")
	assert.Equal(t, good, b.cronJob("bad-reqs").Annotations["datajobs.io/job-version"])
	assert.InDelta(t, 1, b.counter("datajobs_build_builds_total", "result", "user_error"), 0)

	// Once the wheel exists, a redeploy of the same version retries the build.
	buildtest.Wheel(t, b.wheels, "nowheel", "1.2")
	b.deploy("bad-reqs", job.DeploymentChange{JobVersion: ptr(bad)})
	retried := b.builtImage("bad-reqs", bad)
	assert.NotEqual(t, goodImage, retried)
	assert.InDelta(t, 1, b.counter("datajobs_build_builds_total", "result", "user_error"), 0, "no retry without a redeploy")

	// A new deploy with other requirements builds again.
	fixed := b.upload("bad-reqs", map[string]string{"config.ini": "[owner]\n", "requirements.txt": "tinypkg==1.0\n"})
	b.deploy("bad-reqs", job.DeploymentChange{JobVersion: ptr(fixed)})
	assert.NotEqual(t, retried, b.builtImage("bad-reqs", fixed))
}

func TestBuildUserErrorIsRetriedByAnUploadOfTheSameSources(t *testing.T) {
	t.Parallel()
	b := newBuilds(t, testenv.Registry(t))
	b.createJob("late-wheel")
	files := map[string]string{"config.ini": "[owner]\n", "requirements.txt": "latepkg==2.0\n"}
	bad := b.upload("late-wheel", files)
	b.deploy("late-wheel", job.DeploymentChange{JobVersion: ptr(bad), PythonVersion: ptr("3.11")})
	b.eventually(func() bool { return b.state("late-wheel").Desired.Status == job.StatusUserError }, "user_error recorded")

	// An upload of other files is another version: the failed deployment is left alone.
	other := b.upload("late-wheel", map[string]string{"config.ini": "[owner]\n", "requirements.txt": "tinypkg\n"})
	require.NotEqual(t, bad, other)
	d := b.state("late-wheel").Desired
	assert.Equal(t, job.StatusUserError, d.Status)
	assert.Equal(t, bad, d.JobVersion)

	// The wheel is published, and the same files are uploaded again (vdk deploy would
	// also redeploy; this is the upload alone): the same version, built this time.
	buildtest.Wheel(t, b.wheels, "latepkg", "2.0")
	require.Equal(t, bad, b.upload("late-wheel", files))
	b.builtImage("late-wheel", bad)
	assert.Equal(t, job.StatusSynced, b.state("late-wheel").Desired.Status)
	assert.InDelta(t, 1, b.counter("datajobs_build_builds_total", "result", "user_error"), 0)
	assert.InDelta(t, 1, b.counter("datajobs_build_builds_total", "result", "ok"), 0)
}

func TestBuildWhileTheRegistryIsDownIsAPlatformErrorAndRecovers(t *testing.T) {
	t.Parallel()
	reg := testenv.StartRegistry(t)
	b := newBuilds(t, reg.Addr)
	require.NoError(t, reg.Stop())
	b.createJob("reg-down")
	v := b.upload("reg-down", map[string]string{"config.ini": "[owner]\n"})
	b.deploy("reg-down", job.DeploymentChange{JobVersion: ptr(v), PythonVersion: ptr("3.11")})
	var d *job.Deployment
	b.eventually(func() bool {
		d = b.state("reg-down").Desired
		return d.Status == job.StatusPlatformError
	}, "platform_error recorded")
	assert.Contains(t, d.Message, "could not be built")
	assert.Nil(t, b.cronJob("reg-down"), "no CronJob on an image that does not exist")

	require.NoError(t, reg.Start(t.Context()))
	b.builtImage("reg-down", v)
	assert.GreaterOrEqual(t, b.counter("datajobs_build_builds_total", "result", "platform_error"), 1.0)
}
