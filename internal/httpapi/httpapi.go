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
	"strings"
	"time"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/service"
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
	// Bounds of requests (issue 11). MaxConcurrentUploads and MaxConcurrentDownloads cap
	// the sources uploads and downloads in progress; more get 429 with Retry-After
	// (defaults 4 and 16: an upload holds its archive in memory, a download a 1 MiB chunk).
	MaxConcurrentUploads   int
	MaxConcurrentDownloads int
	// RequestTimeout bounds reading a request and writing its answer (default 1m);
	// TransferTimeout does for sources uploads and downloads (default 5m).
	RequestTimeout  time.Duration
	TransferTimeout time.Duration
	// Metrics, when set, counts and times the requests (see NewMetrics).
	Metrics *Metrics
}

// api holds what the handlers share.
type api struct {
	cfg       Config
	svc       *service.Service
	logger    *slog.Logger
	uploads   *slots
	downloads *slots
}

// New returns the handler of every /data-jobs/... path. The server mounts it next to its
// own endpoints (/healthz, /readyz, /metrics), e.g. mux.Handle("/data-jobs/", h).
func New(cfg Config, svc *service.Service, logger *slog.Logger) http.Handler {
	cfg.MaxBodyBytes = cmp.Or(cfg.MaxBodyBytes, 1<<20)
	if cfg.NewOpID == nil {
		cfg.NewOpID = rand.Text
	}
	cfg.MaxConcurrentUploads = cmp.Or(max(cfg.MaxConcurrentUploads, 0), 4)
	cfg.MaxConcurrentDownloads = cmp.Or(max(cfg.MaxConcurrentDownloads, 0), 16)
	cfg.RequestTimeout = cmp.Or(max(cfg.RequestTimeout, 0), time.Minute)
	cfg.TransferTimeout = cmp.Or(max(cfg.TransferTimeout, 0), 5*time.Minute)
	a := &api{
		cfg: cfg, svc: svc, logger: logger,
		uploads:   newSlots("sources uploads", "--max-concurrent-uploads", cfg.MaxConcurrentUploads),
		downloads: newSlots("sources downloads", "--max-concurrent-downloads", cfg.MaxConcurrentDownloads),
	}
	return a.middleware(a.routes())
}

func (a *api) routes() *http.ServeMux {
	mux := http.NewServeMux()
	const team = "/data-jobs/for-team/{team}"
	const jobPath = team + "/jobs/{job}"
	const dep = jobPath + "/deployments/{deployment_id}"

	mux.HandleFunc("GET "+team+"/info", a.info)

	mux.HandleFunc("POST "+team+"/jobs", a.postJobs)
	mux.HandleFunc("GET "+jobPath, a.getJob)
	mux.HandleFunc("PUT "+jobPath, a.updateJob)
	mux.HandleFunc("DELETE "+jobPath, a.deleteJob)
	mux.HandleFunc("PUT "+jobPath+"/team/{new_team}", a.changeTeam)

	mux.HandleFunc("GET "+jobPath+"/deployments", a.listDeployments)
	mux.HandleFunc("POST "+jobPath+"/deployments", a.deploy)
	mux.HandleFunc("GET "+dep, a.getDeployment)
	mux.HandleFunc("PATCH "+dep, a.patchDeployment)
	mux.HandleFunc("DELETE "+dep, a.deleteDeployment)

	mux.HandleFunc("GET "+dep+"/properties", a.getProperties)
	mux.HandleFunc("PUT "+dep+"/properties", a.setProperties)

	mux.HandleFunc("POST "+jobPath+"/sources", a.limit(a.uploads, a.uploadSources))
	mux.HandleFunc("GET "+jobPath+"/sources", a.limit(a.downloads, a.downloadSources))
	mux.HandleFunc("DELETE "+jobPath+"/sources", a.deleteSources)

	if a.cfg.JobsQuery != nil {
		mux.Handle("GET "+team+"/jobs", a.cfg.JobsQuery)
	} else {
		mux.Handle("GET "+team+"/jobs", a.notImplemented("jobs query (GraphQL)"))
	}
	const execution = jobPath + "/executions/{execution_id}"
	mux.HandleFunc("GET "+jobPath+"/executions", a.listExecutions)
	mux.HandleFunc("GET "+dep+"/executions", a.listExecutions)
	mux.HandleFunc("POST "+dep+"/executions", a.startExecution)
	mux.HandleFunc("GET "+execution, a.getExecution)
	mux.HandleFunc("DELETE "+execution, a.cancelExecution)
	mux.HandleFunc("GET "+execution+"/logs", a.executionLogs)

	// Endpoints of features that later releases bring.
	later := []struct{ feature, methods, path string }{
		{"secrets", "GET PUT", dep + "/secrets"},
		{"keytab", "GET", jobPath + "/keytab"},
		{"oauth credentials", "GET PUT", "/data-jobs/teams/{team}/oauth-credentials"},
		{"oauth credentials", "GET", "/data-jobs/teams/{team}/oauth-credentials/client-id"},
		{"oauth credentials", "POST", "/data-jobs/oauth-credentials/client-ids"},
	}
	for _, l := range later {
		for _, m := range strings.Fields(l.methods) {
			mux.Handle(m+" "+l.path, a.notImplemented(l.feature))
		}
	}
	return mux
}

// postJobs is POST .../jobs: VDK's job creation, or the GraphQL jobs query when a
// JobsQuery handler is set and the body is a GraphQL request: an object with a query and
// without a job_name, and no ?name= (a DataJob body has no query field).
func (a *api) postJobs(w http.ResponseWriter, r *http.Request) {
	if a.cfg.JobsQuery != nil && !r.URL.Query().Has("name") {
		body, err := readBody(w, r, a.cfg.MaxBodyBytes)
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var probe struct {
			Query   *string         `json:"query"`
			JobName json.RawMessage `json:"job_name"`
		}
		if json.Unmarshal(body, &probe) == nil && probe.Query != nil && probe.JobName == nil {
			a.cfg.JobsQuery.ServeHTTP(w, r)
			return
		}
	}
	a.createJob(w, r)
}

func (a *api) notImplemented(feature string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.writeError(w, r, job.NotImplemented(feature))
	})
}

func (a *api) info(w http.ResponseWriter, r *http.Request) {
	in := a.svc.Info()
	writeJSON(w, http.StatusOK, infoBody{APIVersion: in.APIVersion, SupportedPythonVersions: in.SupportedPythonVersions})
}

type infoBody struct {
	APIVersion              string   `json:"api_version"`
	SupportedPythonVersions []string `json:"supported_python_versions"`
}
