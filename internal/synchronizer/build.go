package synchronizer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/datajobs/datajobs/internal/build"
	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/metric"
)

// The build stage sits between a desired deployment and its CronJob: when the deployment
// names a stored sources version, the CronJob runs the image built from it, by digest.
// Builds run on their own bounded queue, so a slow build never delays another job's sync;
// while one runs (or after it failed) the CronJob keeps its last good image, because the
// plan holds the job until the image exists. A build's result is kept in the database,
// keyed by job version, python version and base image: a pass over built jobs reads only
// the database, and a built key is never built or pushed again.

// ImageBuilder builds job images; build.LayerBuilder is one.
type ImageBuilder interface {
	build.Builder
	// BaseImage is the base image reference of a python version, "" when none is configured.
	BaseImage(python string) string
}

// BuildStore is what the build stage reads and writes besides the synchronizer's Store.
type BuildStore interface {
	GetSources(ctx context.Context, team, name, version string) (job.Sources, error)
	RecordBuild(ctx context.Context, fence job.Fence, b job.ImageBuild) (bool, error)
	// ClaimPrebuiltImage returns the incarnation a prebuilt image belongs to (prebuilt.go).
	ClaimPrebuiltImage(ctx context.Context, fence job.Fence, name, jobUID, image string) (string, error)
	// StartBuild and EndBuild keep the count of a key's unfinished builds (buildbackoff.go).
	StartBuild(ctx context.Context, fence job.Fence, key job.BuildKey) (int, error)
	EndBuild(ctx context.Context, fence job.Fence, key job.BuildKey) error
}

// BuildConfig configures the build stage. A nil Builder builds nothing: images are then
// <registry>/<job>:<version>, built by someone else (images built earlier are still used),
// looked up by the Resolver when there is one (prebuilt.go), else trusted as they are.
type BuildConfig struct {
	Builder  ImageBuilder
	Resolver Resolver
	Store    BuildStore
	// Workers build that many images at once (default 2): memory and CPU of the leader
	// grow with it, not with the number of jobs.
	Workers int
	// Timeout bounds one build, pip and push included (default 20m).
	Timeout time.Duration
	// Metrics records builds (default: registered nowhere).
	Metrics *BuildMetrics
}

// buildStage is one leadership term's build queue and workers.
type buildStage struct {
	t       *term
	cfg     BuildConfig
	queue   *controller.Queue
	backoff *buildBackoff
	metrics *BuildMetrics
}

// newBuildStage returns the term's build stage; nil when there is neither builder nor
// resolver, or in dry-run.
func (s *Synchronizer) newBuildStage(t *term) *buildStage {
	cfg := s.cfg.Build
	if (cfg.Builder == nil && cfg.Resolver == nil) || cfg.Store == nil || s.cfg.DryRun {
		return nil
	}
	cfg.Workers = cmp.Or(cfg.Workers, 2)
	cfg.Timeout = cmp.Or(cfg.Timeout, 20*time.Minute)
	if cfg.Metrics == nil {
		cfg.Metrics = NewBuildMetrics(nil)
	}
	backoff := newBuildBackoff(s.cfg.RetryBase, s.cfg.RetryMax, s.cfg.Now)
	return &buildStage{
		t: t, cfg: cfg, metrics: cfg.Metrics, backoff: backoff,
		queue: controller.NewQueue(cfg.Metrics.queue, backoff, s.log, "job", "build_failed"),
	}
}

// start runs the build workers under wg until ctx ends; stop drains them.
func (b *buildStage) start(ctx context.Context, wg *sync.WaitGroup) {
	if b == nil {
		return
	}
	wg.Go(func() {
		controller.Run(ctx, b.queue, b.cfg.Workers, func(ctx context.Context, name string) (controller.Result, error) {
			return controller.Result{}, b.build(ctx, name)
		})
	})
}

func (b *buildStage) stop() {
	if b != nil {
		b.queue.ShutDown()
	}
}

// prepareAll prepares every state of a full pass (see prepare).
func (t *term) prepareAll(states map[string]job.SyncState) {
	for name, st := range states {
		states[name] = t.prepare(st)
	}
}

// prepare resolves the image of a desired deployment before it is planned: the built
// image when there is one (the deployment is copied with Image set), a hold while it is
// being built or its prebuilt image looked up (queued here), and nothing for a prebuilt
// image without a resolver. It reads nothing: a pass over built jobs makes no registry request.
func (t *term) prepare(st job.SyncState) job.SyncState {
	bs, d := st.Build, st.Desired
	if bs == nil || d == nil || st.Job == nil {
		return st
	}
	b := t.builds
	if image := usableImage(b, st); image != "" {
		dc := *d
		dc.Image = image
		st.Desired = &dc
		if b != nil {
			b.metrics.cacheHits.Inc()
		}
		return st
	}
	if b == nil || (bs.SourceStored && b.cfg.Builder == nil) || (!bs.SourceStored && b.cfg.Resolver == nil) {
		return st // nobody here to build it, or a prebuilt image trusted as it is
	}
	if d.Status == job.StatusUserError && d.StatusGeneration == st.Job.Generation {
		return st // the build failed on the job's inputs: the plan holds until a new deploy
	}
	held := *bs
	held.Hold = fmt.Sprintf("waiting for the image of version %s to be built", d.JobVersion)
	if !bs.SourceStored {
		held.Hold = fmt.Sprintf("looking up the image %s in the registry", t.prebuiltImage(st))
	}
	st.Build = &held
	// A build in backoff is already scheduled; queueing it now would skip the backoff.
	if b.queue.NumRequeues(st.Name) == 0 {
		b.queueBuild(st)
	}
	return st
}

// usableImage is the recorded image of the deployment when it fits the configuration: the
// same base image (when a builder is configured) for a sources version, the current image
// repository for a prebuilt one.
func usableImage(b *buildStage, st job.SyncState) string {
	bs := st.Build
	if bs.Image == "" {
		return ""
	}
	if !bs.SourceStored && bs.BaseImage == "" && b != nil {
		return b.t.resolvedImage(st)
	}
	if b != nil && b.cfg.Builder != nil && bs.BaseImage != b.cfg.Builder.BaseImage(st.Desired.PythonVersion) {
		return ""
	}
	return bs.Image
}

// build builds the image of a job's desired deployment from fresh state, records it, and
// hands the job back to the sync queue. A failure is recorded on the deployment: a user
// error is final for this generation, a platform error is returned to be retried.
func (b *buildStage) build(ctx context.Context, name string) error {
	s := b.t.s
	st, err := s.db.LoadSyncState(ctx, name)
	if err != nil {
		return fmt.Errorf("load state of %s: %w", name, err)
	}
	if st.Job == nil || st.Desired == nil || st.Build == nil || usableImage(b, st) != "" ||
		(st.Build.SourceStored && b.cfg.Builder == nil) || (!st.Build.SourceStored && b.cfg.Resolver == nil) {
		b.t.queue.Add(name) // nothing to build (any more): let the sync decide
		return nil
	}
	if !st.Build.SourceStored {
		return b.resolve(ctx, st)
	}
	j, d := st.Job, st.Desired
	if d.Status == job.StatusUserError && d.StatusGeneration == j.Generation {
		return nil
	}
	fail := func(status job.SyncStatus, msg string) error {
		_, err := s.db.RecordUnappliedStatus(ctx, b.t.fence, j.Name, j.UID, j.Generation, status, msg)
		return err
	}
	if err := fail(job.StatusBuilding, fmt.Sprintf("building the image of version %s", d.JobVersion)); err != nil {
		return err
	}
	started, err := b.cfg.Store.StartBuild(ctx, b.t.fence, b.buildKey(j, d))
	if err != nil {
		return err
	}
	b.backoff.note(name, started, s.cfg.Now())
	start := time.Now()
	res, err := b.buildImage(ctx, j, d)
	if err != nil {
		if ctx.Err() != nil {
			return err // the term ended; the next leader builds it
		}
		status, result := job.StatusPlatformError, "platform_error"
		if build.IsUserError(err) {
			status, result = job.StatusUserError, "user_error"
		}
		b.metrics.done(result, start, 0)
		msg := fmt.Sprintf("the image of version %s could not be built: %v", d.JobVersion, err)
		if status == job.StatusUserError {
			msg += "; fix it (e.g. publish the missing wheel), then upload the sources again or redeploy (vdk deploy) to retry"
		}
		if recErr := fail(status, msg); recErr != nil {
			return errors.Join(err, recErr)
		}
		s.log.InfoContext(ctx, "image_build_failed", "job", name, "version", d.JobVersion, "status", string(status), "error", err)
		if status == job.StatusUserError {
			// Not retried until a new deploy or upload changes the generation; that build starts at once.
			return b.cfg.Store.EndBuild(ctx, b.t.fence, b.buildKey(j, d))
		}
		return err
	}
	b.metrics.done("ok", start, res.BytesPushed)
	s.log.InfoContext(ctx, "image_built", "job", name, "version", d.JobVersion, "image", res.Image,
		"bytes_pushed", res.BytesPushed, "duration", time.Since(start))
	if _, err := b.cfg.Store.RecordBuild(ctx, b.t.fence, job.ImageBuild{
		JobName: j.Name, JobUID: j.UID, JobVersion: d.JobVersion,
		PythonVersion: d.PythonVersion, BaseImage: res.BaseImage, BaseDigest: res.BaseDigest,
		RequirementsSHA256: res.RequirementsSHA256, Image: res.Image, BytesPushed: res.BytesPushed,
	}); err != nil {
		return err
	}
	b.t.queue.Add(name)
	return nil
}

// buildImage reads the sources and runs the builder, within the build timeout.
func (b *buildStage) buildImage(ctx context.Context, j *job.Job, d *job.Deployment) (build.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
	defer cancel()
	src, err := b.cfg.Store.GetSources(ctx, j.Team, j.Name, d.JobVersion)
	if errors.Is(err, job.ErrNoSources) {
		return build.Result{}, &build.UserError{Message: fmt.Sprintf("the sources of version %s were deleted", d.JobVersion)}
	}
	if err != nil {
		return build.Result{}, err
	}
	return b.cfg.Builder.Build(ctx, build.Request{Job: j.Name, Version: d.JobVersion, PythonVersion: d.PythonVersion, Sources: src.Archive})
}

// BuildMetrics is the build stage's telemetry.
type BuildMetrics struct {
	builds    *prometheus.CounterVec
	duration  prometheus.Histogram
	pushed    prometheus.Counter
	cacheHits prometheus.Counter
	requests  *prometheus.CounterVec
	queue     *controller.Metrics
}

// NewBuildMetrics registers the build metrics on reg (nil: registered nowhere).
func NewBuildMetrics(reg prometheus.Registerer) *BuildMetrics {
	f := metric.On(reg)
	return &BuildMetrics{
		queue:     controller.NewMetrics(f, "build", "build", "Job names"),
		builds:    f.CounterVec("datajobs_build_builds_total", "Image builds, by result (ok, user_error, platform_error).", "result"),
		duration:  f.Histogram("datajobs_build_duration_seconds", "Time to build and push one image, pip included.", prometheus.ExponentialBuckets(0.05, 2, 14)),
		pushed:    f.Counter("datajobs_build_pushed_bytes_total", "Bytes of layers uploaded to the registry."),
		cacheHits: f.Counter("datajobs_build_cache_hits_total", "Syncs of a job whose image was already built (no build, no registry request)."),
		requests:  f.CounterVec("datajobs_build_registry_requests_total", "HTTP requests to registries, by method (reads: GET, HEAD; writes: POST, PUT, PATCH).", "method"),
	}
}

func (m *BuildMetrics) done(result string, start time.Time, pushed int64) {
	m.builds.WithLabelValues(result).Inc()
	m.duration.Observe(time.Since(start).Seconds())
	m.pushed.Add(float64(pushed))
}

// Transport wraps the builder's registry transport to count requests by method.
func (m *BuildMetrics) Transport(inner http.RoundTripper) http.RoundTripper {
	return countingTransport{inner: inner, requests: m.requests}
}

type countingTransport struct {
	inner    http.RoundTripper
	requests *prometheus.CounterVec
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.requests.WithLabelValues(strings.ToUpper(r.Method)).Inc()
	return c.inner.RoundTrip(r)
}
