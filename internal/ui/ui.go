// Package ui serves the web console of datajobs at /ui/: server-rendered pages of the jobs
// of the caller's teams, each job's desired and actual deployment, the synchronizer's
// plan, executions and logs, and the actions of the REST API (enable, disable, run,
// cancel, delete the deployment, edit properties). It reads and acts through the same
// service layer and team authorization as the REST API, and keeps people signed in with
// a session cookie naming a server-side session (see session.go). Pages update themselves by polling
// fragments with ETags (htmx, vendored in static/).
package ui

import (
	"cmp"
	"context"
	"crypto/rand"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/datajobs/datajobs/internal/auth"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/loopback"
	"github.com/datajobs/datajobs/internal/replicaread"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/slots"
	"github.com/datajobs/datajobs/internal/store"
)

//go:embed static templates
var assets embed.FS

// Prefix is where the console is mounted.
const Prefix = "/ui/"

// Service is what the console reads and changes: the use cases of the REST API and the
// job list of the GraphQL jobs query (ListJobs: filters, search, sort and paging run in
// PostgreSQL). *service.Service implements it.
type Service interface {
	ListJobs(ctx context.Context, r job.ListRequest) (job.ListPage, error)
	// Teams lists the teams that own jobs (asked only with a Webhook, for an admin).
	Teams(ctx context.Context) ([]string, error)
	GetJob(ctx context.Context, team, name string) (job.Job, error)
	GetDeployment(ctx context.Context, team, name string) (service.DeploymentView, error)
	PatchDeployment(ctx context.Context, team, name string, c job.DeploymentChange, user string) (job.Deployment, error)
	DeleteDeployment(ctx context.Context, team, name string) error
	GetProperties(ctx context.Context, team, name string) ([]byte, error)
	SetProperties(ctx context.Context, team, name string, props []byte) error
	StartExecution(ctx context.Context, team, name string, req service.ExecutionRequest, caller, opID string) (job.Execution, error)
	ListExecutions(ctx context.Context, team, name string, statuses []string) ([]job.Execution, error)
	GetExecution(ctx context.Context, team, name, id string) (job.Execution, error)
	CancelExecution(ctx context.Context, team, name, id, caller string) (job.Execution, error)
	ExecutionLogs(ctx context.Context, team, name, id string, tailLines int) (string, error)
	RecordAudit(ctx context.Context, e job.AuditEntry) error
	TeamWebhooks(ctx context.Context, team string) ([]job.TeamWebhook, error)
	CreateTeamWebhook(ctx context.Context, team, by string, ch job.TeamWebhookChange) (job.TeamWebhook, error)
	DeleteTeamWebhook(ctx context.Context, team, id string) error
	Revisions(ctx context.Context, team, name string, before, limit int) (job.RevisionsPage, error)
	RollbackDeployment(ctx context.Context, team, name string, n int, user string) (job.Deployment, error)
	CreateBackfill(ctx context.Context, team, name string, req service.BackfillRequest, caller string) (job.Backfill, error)
	Backfills(ctx context.Context, team, name string) ([]job.Backfill, error)
	CancelBackfill(ctx context.Context, team, name string, id int64, caller string) (job.Backfill, error)
	JobNotifications(ctx context.Context, team, name string) ([]job.NotificationEvent, map[int64][]job.NotificationDelivery, error)
	TeamHealth(ctx context.Context, team string) (job.TeamHealth, error)
	SourceFiles(ctx context.Context, team, name, version string) (service.SourceTree, error)
	SourceFileOf(ctx context.Context, team, name, version, path string) (service.SourceFileContent, error)
	// TargetOutages lists the execution targets whose shard cannot run (the pages' banner).
	TargetOutages(ctx context.Context) ([]job.TargetOutage, error)
}

// Plan is the synchronizer's latest decision for one job.
type Plan struct {
	// Action is what it did (or, in dry-run mode, would do): create, update, hold, ...
	Action string
	// Reason says why, in the synchronizer's words.
	Reason string
}

// Plans returns the synchronizer's latest plan of a job; false when this replica has
// none (it is not the leader, or the synchronizer has not looked at the job yet).
type Plans func(jobName string) (Plan, bool)

// Authenticator signs people in through their browser (auth.Login implements it).
type Authenticator interface {
	// AuthCodeURL returns the identity provider's sign-in page for this flow.
	AuthCodeURL(ctx context.Context, redirectURL, state, verifier string) (string, error)
	// Exchange returns who signed in, and until when their token is valid.
	Exchange(ctx context.Context, redirectURL, code, verifier string) (auth.Identity, time.Time, error)
}

// Authorizer is asked, after the team check, whether a request may proceed; the
// console asks it with the REST API's equivalent path and verb (auth.Webhook implements
// it).
type Authorizer interface {
	Authorize(ctx context.Context, req auth.WebhookRequest) error
}

// Config configures the console.
type Config struct {
	// Login signs people in (auth mode oidc). When nil, the console opens directly and
	// everyone is an admin of every team (auth mode none), as in the REST API.
	Login Authenticator
	// Webhook, when set, is asked about every request, as for the REST API.
	Webhook Authorizer
	// SessionKey encrypts and authenticates the login cookie (a sign-in under way) and,
	// in auth mode none, the session cookie; every replica behind one address needs the
	// same one. Any length: it is hashed into an AES-256 key (default: random per process).
	SessionKey []byte
	// SessionMaxAge caps a session, whatever its token's expiry (default 12h).
	SessionMaxAge time.Duration
	// Sessions keeps the sessions of auth mode oidc (*store.Store implements it); required
	// with Login.
	Sessions Sessions
	// PublicURL is the console's external base URL (e.g. https://datajobs.example.com):
	// the sign-in redirect is made from it, never from the request's Host, so it is
	// required with Login; https unless its host is a loopback address. An https URL
	// (or a request over TLS) gives Secure, __Host- cookies.
	PublicURL string
	// ReplicaReads serves the pages' lists from the database's replica, past the
	// user's own writes (nil: the primary serves all).
	ReplicaReads *replicaread.Router
	// LogReads bounds the console's log reads, shared with the REST API's (default: none).
	LogReads *slots.Slots
	// PageSize is the number of jobs per page (default 50).
	PageSize int
	// Plans gives the synchronizer's latest plan of a job (default: none known).
	Plans Plans
	// Secrets reads the names of a job's secrets for its page (nil: the page says secrets
	// are not available).
	Secrets SecretNames
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger receives the console's error lines (default slog.Default()).
	Logger *slog.Logger
}

// Sessions stores the console's sessions of auth mode oidc (migration 0014).
type Sessions interface {
	CreateConsoleSession(ctx context.Context, s store.ConsoleSession) error
	ConsoleSessionByID(ctx context.Context, idHash []byte) (store.ConsoleSession, error)
	DeleteConsoleSession(ctx context.Context, idHash []byte) error
}

// checkPublicURL refuses a console sign-in that would not come back to a fixed, safe
// address.
func checkPublicURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case raw == "":
		return errors.New("the console's sign-in needs --ui-public-url (its external base URL, e.g. https://datajobs.example.com): the redirect URI is never made from the request's Host header")
	case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("--ui-public-url %q: must be a scheme and host only, e.g. https://datajobs.example.com", raw)
	case u.Scheme == "http" && !loopback.Host(u.Hostname()):
		return fmt.Errorf("--ui-public-url %q: must be https (plain http only on a loopback address): the sign-in sends an authorization code there", raw)
	}
	return nil
}

// Console is the web console's handler.
type Console struct {
	cfg     Config
	svc     Service
	pages   *pages
	static  http.Handler
	cookies *cookieCodec
	// schedules computes the next runs the list shows.
	schedules job.Schedules
	mux       *http.ServeMux
	routes    map[string]rule
}

// New returns the console on svc.
func New(cfg Config, svc Service) (*Console, error) {
	cfg.SessionMaxAge = cmp.Or(cfg.SessionMaxAge, 12*time.Hour)
	cfg.PageSize = cmp.Or(cfg.PageSize, 50)
	cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Plans == nil {
		cfg.Plans = func(string) (Plan, bool) { return Plan{}, false }
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	if cfg.Login != nil {
		if err := checkPublicURL(cfg.PublicURL); err != nil {
			return nil, err
		}
		if cfg.Sessions == nil {
			return nil, errors.New("ui: a console with sign-in needs a session store")
		}
	}
	if len(cfg.SessionKey) == 0 {
		cfg.SessionKey = []byte(rand.Text() + rand.Text())
	}
	p, err := parsePages()
	if err != nil {
		return nil, err
	}
	staticFS, err := fs.Sub(assets, "static")
	if err != nil {
		return nil, err
	}
	c := &Console{
		cfg: cfg, svc: svc, pages: p, cookies: newCookieCodec(cfg.SessionKey),
		static: http.StripPrefix(Prefix+"static/", http.FileServerFS(staticFS)),
		mux:    http.NewServeMux(), routes: map[string]rule{},
	}
	c.register()
	return c, nil
}

// rule is how a console route is authorized: whether it is about one team's job (the
// {team} path parameter), and which REST call it equals for the authorization webhook.
type rule struct {
	// public routes need no session: the stylesheet, scripts, sign-in and its callback.
	public bool
	// team routes need the caller to be a member of {team}.
	team bool
	// rest is the REST API's method and path the webhook is asked about ({team}, {job}
	// and {id} are filled in).
	rest string
}

// register adds every route with its rule; a request's route always has one.
func (c *Console) register() {
	const jobPath = Prefix + "teams/{team}/jobs/{job}"
	const restJob = "/data-jobs/for-team/{team}/jobs/{job}"
	const restDep = restJob + "/deployments/{job}"
	const restHooks = "/data-jobs/for-team/{team}/webhooks"
	routes := []struct {
		pattern string
		rule    rule
		h       handlerFunc
	}{
		{"GET " + Prefix + "static/", rule{public: true}, c.serveStatic},
		{"GET " + Prefix + "login", rule{public: true}, c.login},
		{"GET " + Prefix + "callback", rule{public: true}, c.callback},
		{"POST " + Prefix + "logout", rule{public: true}, c.logout},

		{"GET " + Prefix + "{$}", rule{rest: "GET /data-jobs/for-team/{team}/jobs"}, c.jobsList},
		{"GET " + jobPath, rule{team: true, rest: "GET " + restJob}, c.jobPage},
		{"GET " + jobPath + "/deployment", rule{team: true, rest: "GET " + restDep}, c.deploymentPart},
		{"GET " + jobPath + "/executions", rule{team: true, rest: "GET " + restJob + "/executions"}, c.executionsPart},
		{"GET " + jobPath + "/executions/{id}", rule{team: true, rest: "GET " + restJob + "/executions/{id}/logs"}, c.executionPage},
		{"GET " + jobPath + "/executions/{id}/logs", rule{team: true, rest: "GET " + restJob + "/executions/{id}/logs"}, c.logsPart},

		{"GET " + jobPath + "/sources", rule{team: true, rest: "GET " + restJob + "/sources"}, c.sourcesPage},
		{"GET " + Prefix + "teams/{team}/health", rule{team: true, rest: "GET /data-jobs/for-team/{team}/jobs"}, c.healthPage},

		{"POST " + jobPath + "/enable", rule{team: true, rest: "PATCH " + restDep}, c.enable},
		{"POST " + jobPath + "/disable", rule{team: true, rest: "PATCH " + restDep}, c.disable},
		{"POST " + jobPath + "/run", rule{team: true, rest: "POST " + restDep + "/executions"}, c.run},
		{"POST " + jobPath + "/delete-deployment", rule{team: true, rest: "DELETE " + restDep}, c.deleteDeployment},
		{"POST " + jobPath + "/properties", rule{team: true, rest: "PUT " + restDep + "/properties"}, c.setProperties},
		{"POST " + jobPath + "/revisions/{id}/rollback", rule{team: true, rest: "POST " + restDep + "/revisions/{id}/rollback"}, c.rollback},
		{"POST " + jobPath + "/executions/{id}/cancel", rule{team: true, rest: "DELETE " + restJob + "/executions/{id}"}, c.cancel},
		{"POST " + jobPath + "/executions/{id}/rerun", rule{team: true, rest: "POST " + restDep + "/executions"}, c.rerun},
		{"POST " + jobPath + "/backfills", rule{team: true, rest: "POST " + restDep + "/backfills"}, c.createBackfill},
		{"POST " + jobPath + "/backfills/{id}/cancel", rule{team: true, rest: "DELETE " + restDep + "/backfills/{id}"}, c.cancelBackfill},

		{"GET " + Prefix + "teams/{team}/webhooks", rule{team: true, rest: "GET " + restHooks}, c.webhooksPage},
		{"POST " + Prefix + "teams/{team}/webhooks", rule{team: true, rest: "POST " + restHooks}, c.addWebhook},
		{"POST " + Prefix + "teams/{team}/webhooks/{id}/delete", rule{team: true, rest: "DELETE " + restHooks + "/{id}"}, c.deleteWebhook},
	}
	for _, r := range routes {
		c.mux.Handle(r.pattern, c.guard(r.rule, r.h))
		c.routes[r.pattern] = r.rule
	}
	c.registerPipelines()
}

// Patterns returns every route pattern of the console, so that a test can walk them all.
func (c *Console) Patterns() []string {
	out := make([]string, 0, len(c.routes))
	for p := range c.routes {
		out = append(out, p)
	}
	return out
}

// ServeHTTP serves the console; the server mounts it at Prefix.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; form-action 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	c.mux.ServeHTTP(w, r)
}

// handlerFunc is a console handler: an error it returns is shown to the user (see fail).
type handlerFunc func(w http.ResponseWriter, r *http.Request, s session) error

// guard runs a route's checks before h: a session (signing in when there is none), the
// team rule, the CSRF token of a POST, and the webhook.
func (c *Console) guard(rl rule, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
		if rl.public {
			c.finish(w, r, h(w, r, session{}))
			return
		}
		s, ok := c.session(w, r)
		if !ok {
			c.signIn(w, r)
			return
		}
		id := s.identity()
		if rl.team {
			if team := r.PathValue("team"); !id.MemberOf(team) {
				c.fail(w, r, job.Forbidden(id.Username, team, "The caller is not a member of team "+team+"."))
				return
			}
		}
		if r.Method == http.MethodPost && !s.checkCSRF(r) {
			c.fail(w, r, job.NewError(job.KindForbidden,
				"The action was refused.",
				"The form's security token is missing or stale.",
				"Nothing was changed.",
				"Reload the page and try again.",
			))
			return
		}
		if err := c.authorize(r, id, rl); err != nil {
			c.fail(w, r, err)
			return
		}
		if c.cfg.ReplicaReads != nil {
			w, r = c.cfg.ReplicaReads.Prepare(w, r, id.Username)
		}
		c.finish(w, r, c.audited(w, r, s, h))
	})
}

// authorize asks the webhook, if any, about the REST call the request equals.
func (c *Console) authorize(r *http.Request, id auth.Identity, rl rule) error {
	if c.cfg.Webhook == nil {
		return nil
	}
	method, path, _ := strings.Cut(rl.rest, " ")
	team := cmp.Or(r.PathValue("team"), "no-team-specified")
	path = strings.NewReplacer("{team}", team, "{job}", r.PathValue("job"), "{id}", r.PathValue("id"), "{pipeline}", r.PathValue("pipeline"), "{run_id}", r.PathValue("run_id")).Replace(path)
	permission := "write"
	if method == http.MethodGet {
		permission = "read"
	}
	return c.cfg.Webhook.Authorize(r.Context(), auth.WebhookRequest{
		RequesterUserID: id.Username, RequestedResourceTeam: r.PathValue("team"), RequestedResourceName: r.PathValue("job"),
		RequestedResourceID: r.PathValue("id"), RequestedHTTPPath: path, RequestedHTTPVerb: method, RequestedPermission: permission,
	})
}

func (c *Console) finish(w http.ResponseWriter, r *http.Request, err error) {
	if err != nil {
		c.fail(w, r, err)
	}
}

func (c *Console) serveStatic(w http.ResponseWriter, r *http.Request, _ session) error {
	w.Header().Set("Cache-Control", "public, max-age=3600")
	c.static.ServeHTTP(w, r)
	return nil
}

// fail shows err: a domain error's what, why and countermeasures verbatim, as the REST
// API's body has them; anything else as an internal error, logged here.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, err error) {
	var de *job.Error
	switch {
	case errors.As(err, &de):
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		return // nobody reads the answer
	case errors.Is(err, context.DeadlineExceeded):
		de = job.Unavailable("database", err)
	default:
		de = &job.Error{
			What: "The console could not show this.", Why: "datajobs hit an unexpected condition.",
			Consequences: "The action may not have been completed.", Countermeasures: "Reload; if it persists, report it to the operators.",
		}
	}
	status := de.Kind.HTTPStatus()
	if status >= 500 {
		c.cfg.Logger.ErrorContext(r.Context(), "ui_request_failed", "method", r.Method, "pattern", r.Pattern, "error", err)
	}
	data := errorData{Status: status, Error: de}
	if isFragment(r) {
		c.render(w, r, status, "error", data)
		return
	}
	c.renderPage(w, r, status, "errorpage", page{Title: "Error", Body: data})
}

type errorData struct {
	Status int
	Error  *job.Error
}

// isFragment tells a request of htmx (a part of a page) from a navigation.
func isFragment(r *http.Request) bool { return r.Header.Get("HX-Request") == "true" }

// prettyJSON indents a JSON document for reading; other text is returned as it is.
func prettyJSON(b []byte) string {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return string(b)
	}
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return string(b)
	}
	return string(out)
}
