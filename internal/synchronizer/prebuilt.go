package synchronizer

import (
	"context"
	"fmt"
	"strings"

	"github.com/datajobs/datajobs/internal/build"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
)

// A deployment of a job version that is no stored sources version runs a prebuilt image,
// <registry>/<job>:<version>. With a Resolver (--verify-prebuilt-images, the default), the
// build stage looks that tag up in the registry before any CronJob points at it, as it
// builds a sources version: the plan holds the job meanwhile, the digest is recorded like
// a built image's (without a base image) and the CronJob runs <registry>/<job>@sha256:…;
// a tag the registry does not have is a user error of the deployment and the CronJob keeps
// its last good image (DESIGN invariant 12). A version's image is looked up once: a later
// push to the same tag is a new image only for a new job version, as with sources. The tag
// outlives its job: an image a previous job of the name ran is refused to a job created
// again under it (claim).

// Resolver pins a prebuilt image by digest; build.Resolver is one.
type Resolver interface {
	// Resolve returns image by digest; a *build.UserError when the registry has no such image.
	Resolve(ctx context.Context, image string) (string, error)
}

// prebuiltImage is the tagged reference of a desired deployment's prebuilt image.
func (t *term) prebuiltImage(st job.SyncState) string {
	return kube.Image(t.s.cfg.Render.ImageRegistry, st.Name, st.Desired.JobVersion)
}

// resolvedImage is the recorded digest of a prebuilt image when it is in the repository
// the configuration names now ("" otherwise: a changed --image-registry looks it up anew).
func (t *term) resolvedImage(st job.SyncState) string {
	tagged := t.prebuiltImage(st)
	repo := tagged[:strings.LastIndex(tagged, ":")]
	if !strings.HasPrefix(st.Build.Image, repo+"@") {
		return ""
	}
	return st.Build.Image
}

// resolve looks the prebuilt image of a job's desired deployment up, records its digest
// and hands the job back to the sync queue. A missing image is recorded as the
// deployment's user error (final for this generation); a registry that cannot be asked is
// a platform error, returned to be retried.
func (b *buildStage) resolve(ctx context.Context, st job.SyncState) error {
	s, j, d := b.t.s, st.Job, st.Desired
	if d.Status == job.StatusUserError && d.StatusGeneration == j.Generation {
		return nil
	}
	ref := b.t.prebuiltImage(st)
	image, err := b.cfg.Resolver.Resolve(ctx, ref)
	if err == nil {
		err = b.claim(ctx, j, ref, image)
	}
	if err != nil {
		if ctx.Err() != nil {
			return err // the term ended; the next leader looks it up
		}
		status, msg := job.StatusPlatformError, fmt.Sprintf("the image %s of version %s could not be looked up in the registry (retried): %v", ref, d.JobVersion, err)
		if build.IsUserError(err) {
			status = job.StatusUserError
			msg = fmt.Sprintf("version %s is no uploaded sources version, and %v; the CronJob keeps its last good image. Upload the job's sources (vdk deploy) or push the image, then deploy again", d.JobVersion, err)
		}
		if _, recErr := s.db.RecordUnappliedStatus(ctx, b.t.fence, j.Name, j.UID, j.Generation, status, msg); recErr != nil {
			return recErr
		}
		s.log.InfoContext(ctx, "prebuilt_image_unresolved", "job", j.Name, "image", ref, "status", string(status), "error", err)
		if status == job.StatusUserError {
			return nil
		}
		return err
	}
	if _, err := b.cfg.Store.RecordBuild(ctx, b.t.fence, job.ImageBuild{
		JobName: j.Name, JobUID: j.UID, JobVersion: d.JobVersion, PythonVersion: d.PythonVersion, Image: image,
	}); err != nil {
		return err
	}
	s.log.InfoContext(ctx, "prebuilt_image_resolved", "job", j.Name, "image", image)
	b.t.queue.Add(j.Name)
	return nil
}

// claim refuses the image a tag resolved to when a previous job of the name ran it: a job
// deleted and created again (by another team, say) that deployed a version its previous
// owner pushed ran the previous owner's code with its own secrets (issue 41, L9).
func (b *buildStage) claim(ctx context.Context, j *job.Job, ref, image string) error {
	owner, err := b.cfg.Store.ClaimPrebuiltImage(ctx, b.t.fence, j.Name, j.UID, image)
	if err != nil {
		return err
	}
	if owner != "" && owner != j.UID {
		return &build.UserError{Message: fmt.Sprintf("%s is %s, which a previous job named %s ran (deleted since): "+
			"a job created again under a name runs only images pushed for it", ref, image, j.Name)}
	}
	return nil
}
