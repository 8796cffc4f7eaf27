// Package build turns a data job's uploaded sources into a runnable OCI image and pushes
// it to a registry. The image is the configured base image of the deployment's python
// version plus a layer of the sources under /job and, when the sources hold a
// requirements.txt, a layer of the requirements installed as binary wheels. Layers are
// reproducible (sorted entries, fixed times and owners), so the same base, sources and
// wheels give the same digest. docs/builder.md describes the image.
package build

import (
	"context"
	"errors"
	"fmt"
)

// Builder builds the image of one job version and pushes it. LayerBuilder is the one in
// this package (daemonless, in-process); a builder that runs a Kubernetes Job (Kaniko,
// BuildKit) would implement the same interface.
type Builder interface {
	// Build builds and pushes the image of req and returns where it is, by digest. An
	// error is a *UserError when the job's own inputs are at fault (a requirement with no
	// wheel, an unknown python version); anything else is a platform error, worth a retry.
	Build(ctx context.Context, req Request) (Result, error)
}

// Request is what one build is made of.
type Request struct {
	// Job is the data job's name; the image goes to <repository prefix>/<Job>.
	Job string
	// Version is the stored sources version being built (the deployment's job version).
	Version string
	// PythonVersion picks the base image.
	PythonVersion string
	// Sources is the zip archive of the job's directory, as uploaded.
	Sources []byte
}

// Result is a pushed image.
type Result struct {
	// Image is the reference a pod pulls: <registry>/<job>@sha256:<hex>.
	Image string
	// Digest is the manifest digest, "sha256:<hex>".
	Digest string
	// BaseImage and BaseDigest are the configured base reference and what it resolved to.
	BaseImage, BaseDigest string
	// SourceSHA256 is the hex SHA-256 of the uncompressed sources layer (its diff ID).
	SourceSHA256 string
	// RequirementsSHA256 is the hex SHA-256 of requirements.txt, or "" without one.
	RequirementsSHA256 string
	// BytesPushed counts the bytes uploaded to the registry (0 when it had everything).
	BytesPushed int64
}

// UserError is a build failure caused by the job's inputs. It is not retried until the
// inputs change. Message is what the deployment's status shows.
type UserError struct {
	Message string
}

func (e *UserError) Error() string { return e.Message }

// IsUserError reports whether err is (or wraps) a *UserError.
func IsUserError(err error) bool {
	var ue *UserError
	return errors.As(err, &ue)
}

func userErrorf(format string, args ...any) error {
	return &UserError{Message: fmt.Sprintf(format, args...)}
}
