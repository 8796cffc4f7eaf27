// Package auth authenticates API callers and asks an optional webhook whether they may
// act: an OIDC access-token verifier for several issuers (github.com/coreos/go-oidc), the
// caller's identity carried in the request context, and the authorization webhook client
// of the VDK Control Service. What a route requires is decided in httpapi; this package
// only answers who the caller is and what the webhook says.
package auth

import (
	"context"
	"slices"
)

// Identity is the authenticated caller of a request.
type Identity struct {
	// Username is recorded as deployed_by, started_by and the sources uploader.
	Username string
	// Teams are the teams the caller belongs to, lower case.
	Teams []string
	// Admin callers act on every team (a member of an admin team, or anyone in auth
	// mode none).
	Admin bool
	// Verified is true when a token proved the identity (auth mode oidc); then nothing
	// the request says (a header, a body's deployed_by) may replace Username.
	Verified bool
	// Job is set when the caller is a running data job, proved by its pod's
	// ServiceAccount token (internal/jobidentity): it may act on its own deployment's
	// properties and secrets only, whatever Teams and Admin say (both are empty).
	Job *JobCaller
}

// JobCaller is the data job a job token was bound to, read from its pod's labels.
type JobCaller struct {
	Team, Name, UID string
	// Pod is the name of the pod the token is bound to.
	Pod string
}

// MemberOf reports whether the caller may act on team's jobs.
func (id Identity) MemberOf(team string) bool {
	if id.Job != nil {
		return false // a job acts on its own job only (httpapi's rule for it)
	}
	return id.Admin || slices.Contains(id.Teams, team)
}

type identityKey struct{}

// NewContext returns ctx carrying id.
func NewContext(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// FromContext returns the caller of the request ctx belongs to; false when the request
// was not authenticated (which callers treat as "may see nothing").
func FromContext(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}
