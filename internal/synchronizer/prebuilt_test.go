package synchronizer_test

import (
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/build"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/synchronizer"
	"github.com/datajobs/datajobs/internal/testenv"
)

// resolving starts the fixture's synchronizer with the prebuilt-image resolver of
// --verify-prebuilt-images (and no builder), its images in registry.
func resolving(t *testing.T, registry string) *fixture {
	t.Helper()
	f := newFixture(t)
	f.render.ImageRegistry = registry + "/" + f.ns
	f.startWith(synchronizer.Config{Build: synchronizer.BuildConfig{
		Resolver: build.NewResolver(build.ResolverConfig{Insecure: true}), Store: f.db,
	}})
	return f
}

// pushPrebuilt pushes a random image as <registry>/<job>:<version>, as a CI would, and
// returns its digest.
func pushPrebuilt(t *testing.T, f *fixture, jobName, version string) string {
	t.Helper()
	ref, err := name.NewTag(f.render.ImageRegistry+"/"+jobName+":"+version, name.Insecure)
	require.NoError(t, err)
	img, err := random.Image(64, 1)
	require.NoError(t, err)
	require.NoError(t, remote.Write(ref, img, remote.WithContext(t.Context())))
	d, err := img.Digest()
	require.NoError(t, err)
	return d.String()
}

// The seed's bug: `vdk deploy --update --job-version <typo>` was recorded synced and
// pointed the CronJob at <registry>/<job>:<typo>, which the registry answers 404 for; the
// next run failed and the good image was gone from the CronJob.
func TestPrebuiltVersionRunsByDigestAndOneTheRegistryLacksIsAUserErrorKeepingTheLastGoodImage(t *testing.T) {
	t.Parallel()
	f := resolving(t, testenv.Registry(t))
	repo := f.render.ImageRegistry + "/prebuilt-job"
	good := pushPrebuilt(t, f, "prebuilt-job", "release-1")
	f.createJob("prebuilt-job")
	f.deploy("prebuilt-job", job.DeploymentChange{JobVersion: ptr("release-1"), PythonVersion: ptr("3.11")})
	f.synced("prebuilt-job")
	image := func() string {
		return f.cronJob("prebuilt-job").Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image
	}
	assert.Equal(t, repo+"@"+good, image(), "the prebuilt image, pinned by digest")

	// A version nobody uploaded or pushed.
	f.deploy("prebuilt-job", job.DeploymentChange{JobVersion: ptr("relaese-2")})
	var d *job.Deployment
	f.eventually(func() bool {
		d = f.state("prebuilt-job").Desired
		return d.Status == job.StatusUserError && d.StatusGeneration == f.state("prebuilt-job").Job.Generation
	}, "user_error recorded for a version the registry does not have")
	assert.Contains(t, d.Message, repo+":relaese-2", "the message names the reference looked up")
	assert.Contains(t, d.Message, "does not exist")
	assert.Equal(t, repo+"@"+good, image(), "the CronJob keeps its last good image")
	assert.Equal(t, "release-1", f.cronJob("prebuilt-job").Annotations["datajobs.io/job-version"])

	// The image is pushed and deployed again: it runs, by its digest.
	fixed := pushPrebuilt(t, f, "prebuilt-job", "relaese-2")
	f.deploy("prebuilt-job", job.DeploymentChange{JobVersion: ptr("relaese-2")})
	f.synced("prebuilt-job")
	assert.Equal(t, repo+"@"+fixed, image())
}

// An unreachable registry is no verdict on the version: a platform error, retried, with
// no CronJob on an image nobody has seen; the deploy goes through once the registry is back.
func TestPrebuiltVersionWhileTheRegistryIsDownIsAPlatformErrorAndRecovers(t *testing.T) {
	t.Parallel()
	reg := testenv.StartRegistry(t)
	f := resolving(t, reg.Addr)
	digest := pushPrebuilt(t, f, "prebuilt-down", "v1")
	require.NoError(t, reg.Stop())
	f.createJob("prebuilt-down")
	f.deploy("prebuilt-down", job.DeploymentChange{JobVersion: ptr("v1"), PythonVersion: ptr("3.11")})
	var d *job.Deployment
	f.eventually(func() bool {
		d = f.state("prebuilt-down").Desired
		return d.Status == job.StatusPlatformError
	}, "platform_error recorded")
	assert.Contains(t, d.Message, "could not be looked up")
	assert.Nil(t, f.cronJob("prebuilt-down"), "no CronJob on an image not looked up")

	require.NoError(t, reg.Start(t.Context()))
	f.synced("prebuilt-down")
	assert.Equal(t, f.render.ImageRegistry+"/prebuilt-down@"+digest,
		f.cronJob("prebuilt-down").Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image)
}

// Issue 41, L9: a tag outlives its job. A job deleted and created again under its name
// (by another team, say) that deployed a version the previous job had pushed and ran,
// ran the previous owner's image with its own secrets and identity. It is refused now (a
// user error, no CronJob); an image pushed for the new job runs.
func TestAJobCreatedAgainDoesNotRunAnImageItsPreviousOwnerRan(t *testing.T) {
	t.Parallel()
	f := resolving(t, testenv.Registry(t))
	pushPrebuilt(t, f, "reused-name", "v1")
	f.createJob("reused-name")
	f.deploy("reused-name", job.DeploymentChange{JobVersion: ptr("v1"), PythonVersion: ptr("3.11")})
	f.synced("reused-name")
	require.NoError(t, f.svc.DeleteJob(t.Context(), team, "reused-name"))
	f.eventually(func() bool { return f.cronJob("reused-name") == nil }, "the deleted job's CronJob is gone")

	f.createJob("reused-name")
	f.deploy("reused-name", job.DeploymentChange{JobVersion: ptr("v1"), PythonVersion: ptr("3.11")})
	var d *job.Deployment
	f.eventually(func() bool {
		st := f.state("reused-name")
		d = st.Desired
		return d != nil && d.Status == job.StatusUserError && d.StatusGeneration == st.Job.Generation
	}, "user_error recorded for the previous owner's image")
	assert.Contains(t, d.Message, "a previous job named reused-name ran")
	assert.Nil(t, f.cronJob("reused-name"), "no CronJob on the previous owner's image")

	mine := pushPrebuilt(t, f, "reused-name", "v2")
	f.deploy("reused-name", job.DeploymentChange{JobVersion: ptr("v2")})
	f.synced("reused-name")
	assert.Equal(t, f.render.ImageRegistry+"/reused-name@"+mine,
		f.cronJob("reused-name").Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image)
}
