// Package httpapi serves the REST API of datajobs, compatible with the VDK Control
// Service: VDK's paths, snake_case JSON bodies, status codes and error body
// {what, why, consequences, countermeasures}, with VDK's known bugs fixed. Handlers
// decode and encode only; the use cases live in service.
package httpapi

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/replicaread"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/slots"
)

// Config configures the API handler.
type Config struct {
	// MaxBodyBytes caps request bodies; larger ones get 413 (default 1 MiB).
	MaxBodyBytes int64
	// NewOpID makes the operation id of a request that brings no X-OPID (default: 26
	// random base32 characters).
	NewOpID func() string
	// JobsQuery serves VDK's GraphQL jobs query, GET /data-jobs/for-team/{team}/jobs, and
	// POST of the same path when the body is a GraphQL request ({"query": ...} without a
	// job_name; any other POST creates a job). When nil the GET answers 501.
	JobsQuery http.Handler
	// Limits bound the requests (issue 11).
	Limits
	// LogReads, when set, are the log-read slots to use instead (shared with the console;
	// see NewLogReadSlots); Limits' MaxConcurrentLogReads and MaxLogReadsPerCaller are
	// then unused.
	LogReads *slots.Slots
	// Admission is how a request waits for a slot of its kind when all are in use (see
	// package slots; default: up to slots.DefaultWait, as many waiting as may run).
	Admission slots.Queue
	// MinTransferGrace is how long a sources upload or download may go slower than
	// Limits.MinTransferRate at its start (default 10s).
	MinTransferGrace time.Duration
	// Metrics, when set, counts and times the requests (see NewMetrics).
	Metrics *Metrics

	// Auth authenticates every /data-jobs/ request (auth mode oidc). When nil (auth mode
	// none) every caller is an admin named by X-Datajobs-User.
	Auth Authenticator
	// Webhook, when set, is asked about every authenticated request after the team check.
	Webhook Authorizer
	// Jobs authenticates the tokens of running data jobs (internal/jobidentity), in
	// every auth mode: a job is never an admin. Nil: job tokens are not accepted.
	Jobs JobAuthenticator
	// JobTokenTeamExecutions lets a running job's token start, list and read the
	// executions of the jobs of its own team (never another team's, never cancel or
	// logs): what VDK's vdk-dag plugin does from a DAG job's pod (docs/compatibility.md).
	// Off by default: a job's token then reaches its own properties and secrets only.
	JobTokenTeamExecutions bool
	// ReplicaReads serves the list reads of GET requests from the database's replica,
	// past the caller's own writes (nil: the primary serves all).
	ReplicaReads *replicaread.Router
	// Secrets serves the secrets and team OAuth credentials endpoints; nil answers 501.
	Secrets *service.Secrets
}

// api holds what the handlers share.
type api struct {
	cfg       Config
	svc       *service.Service
	logger    *slog.Logger
	uploads   *slots.Slots
	downloads *slots.Slots
	logReads  *slots.Slots
}

// New returns the handler of every /data-jobs/... path. The server mounts it next to its
// own endpoints (/healthz, /readyz, /metrics), e.g. mux.Handle("/data-jobs/", h).
func New(cfg Config, svc *service.Service, logger *slog.Logger) http.Handler {
	cfg.MaxBodyBytes = cmp.Or(cfg.MaxBodyBytes, 1<<20)
	if cfg.NewOpID == nil {
		cfg.NewOpID = rand.Text
	}
	cfg.MaxConcurrentUploads = cmp.Or(max(cfg.MaxConcurrentUploads, 0), DefaultMaxConcurrentUploads)
	cfg.MaxConcurrentDownloads = cmp.Or(max(cfg.MaxConcurrentDownloads, 0), DefaultMaxConcurrentDownloads)
	cfg.MaxUploadsPerCaller = cmp.Or(max(cfg.MaxUploadsPerCaller, 0), DefaultMaxUploadsPerCaller)
	cfg.MaxDownloadsPerCaller = cmp.Or(max(cfg.MaxDownloadsPerCaller, 0), DefaultMaxDownloadsPerCaller)
	if cfg.LogReads == nil {
		cfg.LogReads = NewLogReadSlots(cfg.MaxConcurrentLogReads, cfg.MaxLogReadsPerCaller, cfg.Admission)
	}
	cfg.LogTailLines = cmp.Or(max(cfg.LogTailLines, 0), DefaultLogTailLines)
	cfg.MinTransferRate = cmp.Or(cfg.MinTransferRate, DefaultMinTransferRate)
	cfg.MinTransferGrace = cmp.Or(max(cfg.MinTransferGrace, 0), 10*time.Second)
	cfg.RequestTimeout = cmp.Or(max(cfg.RequestTimeout, 0), DefaultRequestTimeout)
	cfg.TransferTimeout = cmp.Or(max(cfg.TransferTimeout, 0), DefaultTransferTimeout)
	a := &api{
		cfg: cfg, svc: svc, logger: logger,
		uploads: slots.New(slots.Config{
			Kind: "uploads", What: "sources uploads", Flag: "--max-concurrent-uploads", Limit: cfg.MaxConcurrentUploads,
			CallerFlag: "--max-concurrent-uploads-per-caller", PerCaller: cfg.MaxUploadsPerCaller,
		}, cfg.Admission),
		downloads: slots.New(slots.Config{
			Kind: "downloads", What: "sources downloads", Flag: "--max-concurrent-downloads", Limit: cfg.MaxConcurrentDownloads,
			CallerFlag: "--max-concurrent-downloads-per-caller", PerCaller: cfg.MaxDownloadsPerCaller,
		}, cfg.Admission),
		logReads: cfg.LogReads,
	}
	return a.middleware(a.routes())
}

// routes registers every endpoint with its authorization rule (see authz.go).
func (a *api) routes() *router {
	rt := newRouter(a.guard, a.serve)
	const team = "/data-jobs/for-team/{team}"
	const jobPath = team + "/jobs/{job}"
	const dep = jobPath + "/deployments/{deployment_id}"

	rt.handleFunc("GET "+team+"/info", memberOfTeam, a.info)

	rt.collection(team+"/jobs", jobPath, memberOfTeam,
		collection{create: a.postJobs, get: a.getJob, put: a.updateJob, del: a.deleteJob})
	rt.handleFunc("PUT "+jobPath+"/team/{new_team}", memberOfBothTeams, a.changeTeam)

	rt.collection(jobPath+"/deployments", dep, memberOfTeam,
		collection{list: a.listDeployments, create: a.deploy, get: a.getDeployment, del: a.deleteDeployment})
	rt.handleFunc("PATCH "+dep, memberOfTeam, a.patchDeployment)

	rt.handleFunc("GET "+dep+"/revisions", memberOfTeam, a.listRevisions)
	rt.handleFunc("POST "+dep+"/revisions/{revision}/rollback", memberOfTeam, a.rollback)
	rt.handleFunc("GET "+team+"/audit", memberOfTeam, a.audit)

	rt.handleFunc("GET "+dep+"/properties", memberOfTeamOrTheJob, a.getProperties)
	rt.handleFunc("PUT "+dep+"/properties", memberOfTeamOrTheJob, a.setProperties)

	rt.handleFunc("POST "+jobPath+"/sources", memberOfTeam, a.limit(a.uploads, a.uploadSources), sourcesTypes...)
	rt.handleFunc("GET "+jobPath+"/sources", memberOfTeam, a.limit(a.downloads, a.downloadSources))
	rt.handleFunc("DELETE "+jobPath+"/sources", memberOfTeam, a.deleteSources)
	rt.handleFunc("GET "+jobPath+"/notifications", memberOfTeam, a.listNotifications)

	if a.cfg.JobsQuery != nil {
		rt.handle("GET "+team+"/jobs", callersTeamsOnly, a.cfg.JobsQuery)
	} else {
		rt.handle("GET "+team+"/jobs", memberOfTeam, a.notImplemented("jobs query (GraphQL)"))
	}
	const execution = jobPath + "/executions/{execution_id}"
	rt.handleFunc("GET "+jobPath+"/executions", memberOfTeamOrATeamJob, a.listExecutions)
	rt.handleFunc("GET "+dep+"/executions", memberOfTeam, a.listExecutions)
	rt.handleFunc("POST "+dep+"/executions", memberOfTeamOrATeamJob, a.startExecution)
	rt.handleFunc("GET "+execution, memberOfTeamOrATeamJob, a.getExecution)
	rt.handleFunc("DELETE "+execution, memberOfTeam, a.cancelExecution)
	rt.handleFunc("GET "+execution+"/logs", memberOfTeam, a.limit(a.logReads, a.executionLogs))
	a.backfillRoutes(rt, dep)
	a.webhookRoutes(rt, team)
	a.pipelineRoutes(rt, team, jobPath)
	a.profileRoutes(rt)
	a.targetRoutes(rt)
	a.triggerRoutes(rt, team)
	a.gitopsRoutes(rt, team)

	// Secrets and team OAuth credentials (secrets.go); without Config.Secrets they answer
	// 501 naming --secrets-key-file.
	rt.handleFunc("GET "+dep+"/secrets", memberOfTeamOrTheJob, a.getSecrets)
	rt.handleFunc("PUT "+dep+"/secrets", memberOfTeam, a.setSecrets)
	const oauth = "/data-jobs/teams/{team}/oauth-credentials"
	rt.handleFunc("GET "+oauth, memberOfTeam, a.getTeamOAuth)
	rt.handleFunc("PUT "+oauth, memberOfTeam, a.putTeamOAuth)
	rt.handleFunc("GET "+oauth+"/client-id", memberOfTeam, a.getTeamClientID)
	rt.handleFunc("POST /data-jobs/oauth-credentials/client-ids", anyCaller, a.teamsOfClientIDs)
	rt.handleFunc("GET "+jobPath+"/keytab", memberOfTeam, a.keytab)
	return rt
}

// postJobs is POST .../jobs: VDK's job creation, or the GraphQL jobs query when a
// JobsQuery handler is set and the body is a GraphQL request: an object with a query and
// without a job_name, and no ?name= (a DataJob body has no query field).
func (a *api) postJobs(w http.ResponseWriter, r *http.Request) error {
	if a.cfg.JobsQuery != nil && !r.URL.Query().Has("name") {
		body, err := a.body(w, r)
		if err != nil {
			return err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var probe struct {
			Query   *string         `json:"query"`
			JobName json.RawMessage `json:"job_name"`
		}
		if json.Unmarshal(body, &probe) == nil && probe.Query != nil && probe.JobName == nil {
			markRead(r.Context()) // a query, not a write
			a.cfg.JobsQuery.ServeHTTP(w, r)
			return nil
		}
	}
	return a.createJob(w, r)
}

func (a *api) notImplemented(feature string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.writeError(w, r, job.NotImplemented(feature))
	})
}

func (a *api) info(w http.ResponseWriter, r *http.Request) error {
	in := a.svc.Info()
	writeJSON(w, http.StatusOK, infoBody{APIVersion: in.APIVersion, SupportedPythonVersions: in.SupportedPythonVersions})
	return nil
}

type infoBody struct {
	APIVersion              string   `json:"api_version"`
	SupportedPythonVersions []string `json:"supported_python_versions"`
}
