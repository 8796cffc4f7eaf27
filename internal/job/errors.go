package job

import (
	"errors"
	"fmt"
	"net/http"
)

// Kind classifies a domain error; each kind is answered with one HTTP status (HTTPStatus).
type Kind int

// The kinds of domain errors.
const (
	KindInvalid              Kind = iota + 1 // bad input: 400
	KindNotFound                             // missing job or deployment: 404
	KindConflict                             // already exists or unsupported python version: 409
	KindTooLarge                             // request body over the limit: 413
	KindUnavailable                          // a dependency is down: 503
	KindNotImplemented                       // feature not available yet: 501
	KindBusy                                 // too many requests of the kind at once, retry later: 429
	KindUnauthenticated                      // no valid bearer token: 401
	KindForbidden                            // the caller may not act on the team: 403
	KindUnsupportedMediaType                 // a body of a content type the endpoint does not take: 415
	KindPreconditionFailed                   // an If-Match that names another version: 412
	KindGone                                 // something that existed and is gone for good: 410
	KindRequestTimeout                       // the client sent its request too slowly: 408
)

// HTTPStatus is the status a kind is answered with, by the REST API and the console alike:
// the one place where it is decided. An unknown kind is a bug: 500.
func (k Kind) HTTPStatus() int {
	switch k {
	case KindInvalid:
		return http.StatusBadRequest
	case KindNotFound:
		return http.StatusNotFound
	case KindConflict:
		return http.StatusConflict
	case KindTooLarge:
		return http.StatusRequestEntityTooLarge
	case KindUnavailable:
		return http.StatusServiceUnavailable
	case KindNotImplemented:
		return http.StatusNotImplemented
	case KindBusy:
		return http.StatusTooManyRequests
	case KindUnauthenticated:
		return http.StatusUnauthorized
	case KindForbidden:
		return http.StatusForbidden
	case KindUnsupportedMediaType:
		return http.StatusUnsupportedMediaType
	case KindPreconditionFailed:
		return http.StatusPreconditionFailed
	case KindGone:
		return http.StatusGone
	case KindRequestTimeout:
		return http.StatusRequestTimeout
	default:
		return http.StatusInternalServerError
	}
}

// Error is a user-facing error in the shape of VDK's error body.
type Error struct {
	Kind            Kind
	What            string
	Why             string
	Consequences    string
	Countermeasures string
	Err             error // the cause, if any; never shown to the user
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s %s: %v", e.What, e.Why, e.Err)
	}
	return e.What + " " + e.Why
}

func (e *Error) Unwrap() error { return e.Err }

// The consequences most refusals share.
const (
	notProcessed   = "The request was not processed."
	nothingChanged = "The request was not processed and nothing was changed."
)

// NewError is a refusal with VDK's four sentences, in the order its error body shows them.
func NewError(kind Kind, what, why, consequences, countermeasures string) *Error {
	return &Error{Kind: kind, What: what, Why: why, Consequences: consequences, Countermeasures: countermeasures}
}

// KindOf returns the kind of err, or 0 when it is not a domain error.
func KindOf(err error) Kind {
	var de *Error
	if errors.As(err, &de) {
		return de.Kind
	}
	return 0
}

// Invalid reports a parameter that breaks a constraint.
func Invalid(param, constraint string, value any) *Error {
	return NewError(KindInvalid, fmt.Sprintf("Parameter %s is not valid.", param),
		fmt.Sprintf("It must be %s, but was %v.", constraint, value),
		nothingChanged, fmt.Sprintf("Correct %s and retry.", param))
}

// JobNotFound reports a job that does not exist for a team.
func JobNotFound(team, name string) *Error {
	return NewError(KindNotFound, fmt.Sprintf("The data job %q was not found for team %q.", name, team),
		"No data job with that name belongs to that team.",
		notProcessed, "Check the job name and the team, or create the job first.")
}

// NotFoundInTeam reports an object of a kind the team has by name (a pipeline, a
// trigger) that it has not; GET …/{kind}s lists those it has.
func NotFoundInTeam(kind, team, name string) *Error {
	return NewError(KindNotFound, fmt.Sprintf("The %s %q of team %q was not found.", kind, name, team),
		fmt.Sprintf("No %s of that name exists in the team.", kind),
		notProcessed, fmt.Sprintf("Check the team and %s name (GET …/%ss lists them).", kind, kind))
}

// JobNotGranted reports a use of the job name of team by grantee (a pipeline's node, a
// trigger) that team has not granted: what says the use refused, consequence what was not
// done.
func JobNotGranted(what, team, name, grantee, consequence string) *Error {
	return NewError(KindForbidden, what,
		fmt.Sprintf("Team %q has not granted job %q to team %q.", team, name, grantee),
		consequence,
		fmt.Sprintf("A member of team %q grants it: PUT /data-jobs/for-team/%s/jobs/%s/grants/%s.", team, team, name, grantee),
	)
}

// DeploymentNotFound reports a job that has no deployment.
func DeploymentNotFound(name string) *Error {
	return NewError(KindNotFound, fmt.Sprintf("The data job %q has no deployment.", name),
		"The job was never deployed, or its deployment was deleted.",
		notProcessed, "Deploy the job first (POST .../deployments).")
}

// JobExists reports a create of a name that is taken.
func JobExists(name string) *Error {
	return NewError(KindConflict, fmt.Sprintf("The data job %q already exists.", name),
		"Job names are unique across all teams.",
		"The job was not created.", "Choose another name, or delete the existing job first.")
}

// NotImplemented reports an endpoint of a feature that is not available yet.
func NotImplemented(feature string) *Error {
	return NewError(KindNotImplemented, fmt.Sprintf("The %s feature is not available yet.", feature),
		"This datajobs release does not implement it.",
		notProcessed, "Upgrade datajobs when the feature is released.")
}

// Unavailable reports that a dependency (the database) cannot be reached.
func Unavailable(dependency string, err error) *Error {
	return &Error{
		Kind:            KindUnavailable,
		What:            fmt.Sprintf("The %s is not reachable.", dependency),
		Why:             "datajobs could not reach a service it depends on.",
		Consequences:    "The request was not processed and nothing was changed.",
		Countermeasures: "Retry in a moment; if it persists, ask the operators to check the " + dependency + ".",
		Err:             err,
	}
}

// TooSlow reports work that did not complete within its time limit (limit names it, as
// an operator would look it up): a 503, since retrying later may well succeed.
func TooSlow(limit string, err error) *Error {
	return &Error{
		Kind:            KindUnavailable,
		What:            "The request did not complete in time.",
		Why:             "It ran past " + limit + ".",
		Consequences:    "The request was not completed and nothing was changed.",
		Countermeasures: "Retry in a moment; if it persists, ask the operators to look at the database's load and at " + limit + ".",
		Err:             err,
	}
}

// TeamJobsQuota reports a team that has as many data jobs as it may have.
func TeamJobsQuota(team string, limit int) *Error {
	return NewError(KindConflict, fmt.Sprintf("The team %q has reached its limit of %d data jobs.", team, limit),
		fmt.Sprintf("The service allows at most %d data jobs per team (max-jobs-per-team).", limit),
		"The data job was not created or moved, and nothing was changed.", "Delete data jobs the team no longer needs, or ask the operators to raise max-jobs-per-team.")
}

// TeamExecutionsQuota reports a start while a team has as many manual executions
// submitted or running as it may (issue 41, L6).
func TeamExecutionsQuota(team string, limit int) *Error {
	return NewError(KindConflict, fmt.Sprintf("The team %q has %d manual executions submitted or running, its limit.", team, limit),
		fmt.Sprintf("The service runs at most %d manual executions (starts, re-runs, backfill runs) of a team at once.", limit),
		"The execution was not started, and nothing was changed.", "Start it again once some of the team's executions have finished (a backfill waits by itself), or ask the operators to raise the limit.")
}

// TeamSourcesQuota reports an upload that would take a team's stored sources over its limit.
func TeamSourcesQuota(team string, limit int64) *Error {
	return NewError(KindConflict, fmt.Sprintf("The sources of team %q would exceed the team's limit of %d bytes.", team, limit),
		fmt.Sprintf("The service stores at most %d bytes of sources archives per team (max-source-bytes-per-team).", limit),
		"The sources were not uploaded and nothing was changed.", "Delete the sources of jobs the team no longer needs, keep fewer versions, or ask the operators to raise max-source-bytes-per-team.")
}

// Unauthenticated reports a request without a valid bearer token; why says what is wrong
// with it (never the token itself).
func Unauthenticated(why string) *Error {
	return NewError(KindUnauthenticated, "The request is not authenticated.",
		why,
		nothingChanged, "Send a valid access token of a trusted issuer as Authorization: Bearer <token> (vdk login).")
}

// Forbidden reports a caller who may not act on team's jobs; why names the rule (not a
// member, or the authorization webhook's answer).
func Forbidden(user, team, why string) *Error {
	return NewError(KindForbidden, fmt.Sprintf("User %s may not act on the jobs of team %s.", user, team),
		why,
		nothingChanged, fmt.Sprintf("Ask an administrator to add you to team %s, or use a token of one of its members.", team))
}

// UnsupportedMediaType reports a body whose content type the endpoint does not take.
func UnsupportedMediaType(got, want string) *Error {
	return NewError(KindUnsupportedMediaType, "The request body has an unsupported content type.",
		fmt.Sprintf("It must be %s, but was %q.", want, got),
		nothingChanged, "Send the body with Content-Type: "+want+".")
}

// PreconditionFailed reports a write whose If-Match names a version of what (the job
// "x", its properties) other than the current one: someone changed it since the client
// read it.
func PreconditionFailed(what, current string) *Error {
	return NewError(KindPreconditionFailed, fmt.Sprintf("%s changed since the version the request names in If-Match.", what),
		fmt.Sprintf("Its current version (ETag) is %s.", current),
		nothingChanged, "Read it again (GET), apply the change to what it is now, and retry with the new ETag in If-Match (or without If-Match to overwrite).")
}
