package httpapi

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strings"

	"github.com/datajobs/datajobs/internal/auth"
	"github.com/datajobs/datajobs/internal/job"
)

// Authenticator says who the caller of a request is; auth.OIDC implements it.
type Authenticator interface {
	// Authenticate returns the caller, or a domain error (Unauthenticated: 401,
	// Unavailable: 503).
	Authenticate(r *http.Request) (auth.Identity, error)
}

// Authorizer is asked, after the team check, whether an authenticated request may
// proceed; auth.Webhook implements it.
type Authorizer interface {
	Authorize(ctx context.Context, req auth.WebhookRequest) error
}

// JobAuthenticator authenticates running data jobs by their pod's token;
// jobidentity.Verifier implements it.
type JobAuthenticator interface {
	// Owns reports whether r carries a job token (only Authenticate may judge it).
	Owns(r *http.Request) bool
	Authenticator
}

// rule is how a route is authorized: the path parameters naming the teams the caller
// must belong to, all of them. Every route has one (router.handle takes it), and a
// request whose route has none is refused, so a new route cannot skip the check.
type rule struct {
	// teamParams name path parameters holding teams; empty means any authenticated
	// caller.
	teamParams []string
	// theJob lets a data job's own token through (auth.Identity.Job) when the path's
	// {team} and {job} are that job's; every other route refuses job callers.
	theJob bool
	// teamJobs lets a data job's token through when the path's {team} is the job's own
	// team and Config.JobTokenTeamExecutions is on: what vdk-dag needs to start and follow
	// the executions of the other jobs of its DAG.
	teamJobs bool
	// admin lets only the members of the admin teams through (execution profiles).
	admin bool
	// signed: a call that carries no credentials of a caller but a signature of its body,
	// which the handler checks (a trigger's invocation, issue 42): not authenticated, no
	// team, no webhook, any body type.
	signed bool
}

// The rules of the routes.
var (
	// memberOfTeam: the caller belongs to the path's {team}. GraphQL queries are also
	// filtered by the caller's teams inside their SQL.
	memberOfTeam = rule{teamParams: []string{"team"}}
	// memberOfTeamOrTheJob: a member of {team}, or the running job {job} itself (its
	// properties and secrets: what vdk-core's job_input reads and writes at run time).
	memberOfTeamOrTheJob = rule{teamParams: []string{"team"}, theJob: true}
	// memberOfTeamOrATeamJob: a member of {team}, or, with Config.JobTokenTeamExecutions,
	// a running job of {team} (vdk-dag's start, list and read of its DAG's executions).
	memberOfTeamOrATeamJob = rule{teamParams: []string{"team"}, teamJobs: true}
	// memberOfBothTeams: moving a job needs both the old and the new team.
	memberOfBothTeams = rule{teamParams: []string{"team", "new_team"}}
	// anyCaller: a route that names no team (authentication only).
	anyCaller = rule{}
	// callersTeamsOnly: the GraphQL jobs query, whatever team its path names (vdkcli list
	// --all sends "no-team-specified"): any caller, and its SQL returns only the rows of
	// the caller's teams (graphapi, store.Visibility).
	callersTeamsOnly = rule{}
	// signedCall: a trigger's invocation, authenticated by its signature (the handler).
	signedCall = rule{signed: true}
)

// route is what the middleware needs to know about a pattern before its handler runs.
type route struct {
	rule rule
	// bodyTypes are the media types a body may have (default application/json).
	bodyTypes []string
}

// router registers every route with its authorization rule.
type router struct {
	mux    *http.ServeMux
	routes map[string]route
	guard  func(route, http.Handler) http.Handler
	serve  func(handler) http.HandlerFunc
}

func newRouter(guard func(route, http.Handler) http.Handler, serve func(handler) http.HandlerFunc) *router {
	return &router{mux: http.NewServeMux(), routes: map[string]route{}, guard: guard, serve: serve}
}

// handle registers h for pattern ("METHOD /path"), authorized by rl; a body, when the
// request has one, must be of one of bodyTypes (application/json when none are given).
func (rt *router) handle(pattern string, rl rule, h http.Handler, bodyTypes ...string) {
	if len(bodyTypes) == 0 {
		bodyTypes = []string{"application/json"}
	}
	r := route{rule: rl, bodyTypes: bodyTypes}
	rt.mux.Handle(pattern, rt.guard(r, h))
	rt.routes[pattern] = r
}

// handleFunc registers the endpoint h (see handler) like handle.
func (rt *router) handleFunc(pattern string, rl rule, h handler, bodyTypes ...string) {
	rt.handle(pattern, rl, rt.serve(h), bodyTypes...)
}

// collection is the endpoints of a REST collection: list and create at its path, get, put
// and delete at the path of one of its items; nil is no such endpoint.
type collection struct {
	list, create, get, put, del handler
}

// collection registers c's endpoints at all and one, each authorized by rl.
func (rt *router) collection(all, one string, rl rule, c collection) {
	for _, e := range []struct {
		pattern string
		h       handler
	}{
		{"GET " + all, c.list},
		{"POST " + all, c.create},
		{"GET " + one, c.get},
		{"PUT " + one, c.put},
		{"DELETE " + one, c.del},
	} {
		if e.h != nil {
			rt.handleFunc(e.pattern, rl, e.h)
		}
	}
}

// guard runs the route's checks before h, once the mux has set the path values: the
// caller must pass the rule and the webhook, and a body must be of an accepted type.
func (a *api) guard(rt route, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := auth.FromContext(r.Context())
		if !ok {
			a.writeError(w, r, errors.New("request reached a route without an identity"))
			return
		}
		if err := a.authorize(r, id, rt); err != nil {
			if job.KindOf(err) == job.KindUnauthenticated {
				w.Header().Set("WWW-Authenticate", `Bearer realm="datajobs"`)
			}
			a.writeError(w, r, err)
			return
		}
		if err := checkBodyType(r, rt); err != nil {
			a.writeError(w, r, err)
			return
		}
		a.audited(rt, w, r, h)
	})
}

// Patterns returns the pattern of every route New serves with cfg, sorted, so that a
// test can walk them all: each must have an authorization case.
func Patterns(cfg Config) []string {
	a := &api{cfg: cfg}
	out := slices.Collect(maps.Keys(a.routes().routes))
	slices.Sort(out)
	return out
}

// signedCaller is the identity of a signed call (rule signed): nobody, until the handler
// has checked the signature.
const signedCaller = "signed-call"

// callerOf authenticates the caller of r, unless its route is a signed call.
func (a *api) callerOf(r *http.Request, rt *router) (auth.Identity, error) {
	if _, pattern := rt.mux.Handler(r); rt.routes[pattern].rule.signed {
		return auth.Identity{Username: signedCaller}, nil
	}
	return a.authenticate(r)
}

// authenticate returns the caller: from the token in auth mode oidc; in mode none an
// admin named by X-Datajobs-User. A request marked JobsOnlyHeader is a job or nobody.
func (a *api) authenticate(r *http.Request) (auth.Identity, error) {
	if a.cfg.Jobs != nil && a.cfg.Jobs.Owns(r) {
		return a.cfg.Jobs.Authenticate(r)
	}
	if r.Header.Get(JobsOnlyHeader) != "" {
		err := job.Unauthenticated("This address serves running data jobs only: the job's own pod token is required.")
		err.Countermeasures = "Call it from the job's pod with the token its DATAJOBS_TOKEN_FILE holds (the base image's vdk-datajobs plugin does); people use the API's own address."
		return auth.Identity{}, err
	}
	if a.cfg.Auth == nil {
		return auth.Identity{Username: r.Header.Get(userHeader), Admin: true}, nil
	}
	return a.cfg.Auth.Authenticate(r)
}

// authorize checks the caller against the route's rule, then asks the webhook if there
// is one.
func (a *api) authorize(r *http.Request, id auth.Identity, rt route) error {
	if err := a.authorizeTeams(r, id, rt); err != nil {
		return err
	}
	if a.cfg.Webhook == nil || rt.rule.signed {
		return nil
	}
	permission := "write"
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		permission = "read"
	}
	return a.cfg.Webhook.Authorize(r.Context(), auth.WebhookRequest{
		RequesterUserID:          id.Username,
		RequestedResourceTeam:    r.PathValue("team"),
		RequestedResourceName:    r.PathValue("job"),
		RequestedResourceID:      cmp.Or(r.PathValue("execution_id"), r.PathValue("deployment_id")),
		RequestedHTTPPath:        r.URL.Path,
		RequestedHTTPVerb:        r.Method,
		RequestedResourceNewTeam: r.PathValue("new_team"),
		RequestedPermission:      permission,
	})
}

// authorizeTeams checks the route's rule: the caller belongs to every team it names, or
// is the job the path names on a route that lets it through.
func (a *api) authorizeTeams(r *http.Request, id auth.Identity, rt route) error {
	if id.Job != nil {
		if err := authorizeJob(r, id, rt, a.cfg.JobTokenTeamExecutions); err != nil {
			return err
		}
		return a.currentIncarnation(r, id)
	}
	if rt.rule.admin && !id.Admin {
		return job.AdminOnly(id.Username)
	}
	for _, p := range rt.rule.teamParams {
		if team := r.PathValue(p); !id.MemberOf(team) {
			return job.Forbidden(id.Username, team, "The caller is not a member of team "+team+".")
		}
	}
	return nil
}

// authorizeJob lets a job caller act on its own job, on routes that allow it, and, when
// teamExecutions is on, on the executions of its own team's jobs (rule.teamJobs).
func authorizeJob(r *http.Request, id auth.Identity, rt route, teamExecutions bool) error {
	team, name := r.PathValue("team"), r.PathValue("job")
	if rt.rule.theJob && team == id.Job.Team && name == id.Job.Name {
		return nil
	}
	if rt.rule.teamJobs && teamExecutions && team == id.Job.Team {
		return nil
	}
	why := "A data job's token reads its own deployment's properties and secrets and writes its own properties, nothing else."
	if teamExecutions {
		why = "A data job's token reads its own deployment's properties and secrets, writes its own properties, and starts, lists and reads the executions of its own team's jobs, nothing else."
	}
	return job.Forbidden(id.Username, team, why)
}

// currentIncarnation refuses a job token whose pod ran a previous job of its name: the
// job was deleted and created again (by its team, or by another), and the pod of the old
// one, still running, read the new one's secrets (issue 41, L3). The pod's label names the
// incarnation it was made for; the job's row names the one there is now.
func (a *api) currentIncarnation(r *http.Request, id auth.Identity) error {
	j, err := a.svc.GetJob(r.Context(), id.Job.Team, id.Job.Name)
	switch {
	case job.KindOf(err) == job.KindNotFound:
	case err != nil:
		return err
	case j.UID == id.Job.UID:
		return nil
	}
	return job.Forbidden(id.Username, id.Job.Team, "The token's pod ran a previous data job named "+id.Job.Name+
		", deleted since: it reaches nothing of the job of that name now.")
}

// checkBodyType refuses a body whose media type the route does not take (415): a
// browser can send text/plain or a form across sites without asking, never JSON.
func checkBodyType(r *http.Request, rt route) error {
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody || rt.rule.signed {
		return nil
	}
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && slices.Contains(rt.bodyTypes, strings.ToLower(mt)) {
		return nil
	}
	return job.UnsupportedMediaType(ct, strings.Join(rt.bodyTypes, " or "))
}

// user is who makes a change, recorded as deployed_by, the canceller or the sources
// uploader: the token's username in auth mode oidc (a header or body field cannot
// change it); in mode none X-Datajobs-User, then the body's field, then "unknown".
func (a *api) user(r *http.Request, bodyUser string) string {
	id, _ := auth.FromContext(r.Context())
	if id.Verified {
		return id.Username
	}
	return cmp.Or(id.Username, bodyUser, "unknown")
}

// startedBy is an execution's started_by, as VDK records it: the body's started_by (the
// client's label, such as "manual/vdk-control-cli") followed by "/" and the caller, or the
// caller alone. The caller part is the token's username in auth mode oidc, so the label
// cannot hide who started the run.
func (a *api) startedBy(r *http.Request, bodyStartedBy string) string {
	id, _ := auth.FromContext(r.Context())
	switch {
	case bodyStartedBy == "":
		return a.user(r, "")
	case id.Username == "":
		return bodyStartedBy
	default:
		return bodyStartedBy + "/" + id.Username
	}
}
