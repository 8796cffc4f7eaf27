package graphapi_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/graphapi"
	"github.com/datajobs/datajobs/internal/httpapi"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// now is the clock of every test: next runs are computed from it.
var now = time.Date(2030, 1, 1, 0, 0, 30, 0, time.UTC)

// env is the whole API (REST and GraphQL) on a fresh database, as a client sees it.
type env struct {
	t     testing.TB
	url   string
	dbURL string
	store *store.Store
	stmts *statementCounter
	gql   *graphapi.Handler
}

type options struct {
	storeURL string // the GraphQL store on another URL (a database that is down)
	cfg      graphapi.Config
}

func newEnv(t testing.TB, opts ...func(*options)) *env {
	t.Helper()
	o := options{cfg: graphapi.Config{
		Now:               func() time.Time { return now },
		SourceURLTemplate: "https://git.example.com/jobs/tree/main/{job}",
		LogsURLTemplate:   "https://logs.example.com/{team}/{job}?execution={execution}",
	}}
	for _, f := range opts {
		f(&o)
	}
	dbURL := testenv.DatabaseURL(t)
	st := openStore(t, dbURL, nil)
	counter := &statementCounter{}
	gst := openStore(t, cmpOr(o.storeURL, dbURL), counter)
	svc, err := service.New(service.Config{SupportedPythonVersions: []string{"3.9", "3.11"}}, st)
	require.NoError(t, err)
	o.cfg.DefaultResources = svc.Config().Resources.Default
	o.cfg.Logger = slog.New(slog.DiscardHandler)
	gsvc, err := service.New(service.Config{SupportedPythonVersions: []string{"3.9", "3.11"}, Now: o.cfg.Now}, gst)
	require.NoError(t, err)
	gql, err := graphapi.New(o.cfg, gsvc)
	require.NoError(t, err)
	h := httpapi.New(httpapi.Config{JobsQuery: gql}, svc, o.cfg.Logger)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &env{t: t, url: srv.URL, dbURL: dbURL, store: st, stmts: counter, gql: gql}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func openStore(t testing.TB, u string, tracer pgx.QueryTracer) *store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), store.Config{URL: u, Tracer: tracer})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	return st
}

// statementCounter counts the SQL statements a store sends, and remembers their text.
type statementCounter struct {
	mu    sync.Mutex
	stmts []string
}

func (c *statementCounter) add(sql string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stmts = append(c.stmts, sql)
}

func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.add(d.SQL)
	return ctx
}

func (c *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *statementCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (c *statementCounter) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	c.add(d.SQL)
}

func (c *statementCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// take returns the statements counted so far and starts counting again.
func (c *statementCounter) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stmts
	c.stmts = nil
	return s
}

// response is what a client of the GraphQL endpoint sees.
type response struct {
	status int
	body   []byte
	Data   json.RawMessage `json:"data"`
	Errors []struct {
		Message   string `json:"message"`
		Locations []struct {
			Line, Column int
		} `json:"locations"`
		Path []any `json:"path"`
	} `json:"errors"`
}

// page decodes a successful jobs page.
func (r response) page(t testing.TB) page {
	t.Helper()
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.NotNil(t, r.Errors, "errors must be [] on success: %s", r.body)
	require.Empty(t, r.Errors)
	var p page
	require.NoError(t, json.Unmarshal(r.Data, &p), "%s", r.body)
	return p
}

// names decodes a page and returns its job names in order.
func (r response) names(t testing.TB) []string {
	t.Helper()
	return r.values(t, "jobName")
}

// values decodes a page and returns the string field key of each element, in order.
func (r response) values(t testing.TB, key string) []string {
	t.Helper()
	out := []string{}
	for _, c := range r.page(t).Content {
		out = append(out, c[key].(string))
	}
	return out
}

// errorMessage requires one error with status and returns its message.
func (r response) errorMessage(t testing.TB, status int) string {
	t.Helper()
	require.Equal(t, status, r.status, "%s", r.body)
	require.JSONEq(t, "null", string(r.Data), "%s", r.body)
	require.Len(t, r.Errors, 1, "%s", r.body)
	return r.Errors[0].Message
}

type page struct {
	Content    []map[string]any `json:"content"`
	TotalPages *int             `json:"totalPages"`
	TotalItems *int             `json:"totalItems"`
}

// query runs a GraphQL query the way VDK clients do: GET with query parameters.
func (e *env) query(q string, vars string) response {
	e.t.Helper()
	p := url.Values{}
	if q != "" {
		p.Set("query", q)
	}
	if vars != "" {
		p.Set("variables", vars)
	}
	return e.get("/data-jobs/for-team/any-team/jobs?" + p.Encode())
}

func (e *env) get(path string) response {
	e.t.Helper()
	return e.do("GET", path, "")
}

func (e *env) do(method, path, body string) response {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.url+path, rd)
	require.NoError(e.t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(e.t, err)
	r := response{status: res.StatusCode, body: b}
	_ = json.Unmarshal(b, &r) // the GraphQL envelope, when it is one
	return r
}

// jobSpec describes a job to create through the REST API.
type jobSpec struct {
	team, name, description, schedule string
	contacts                          bool
}

func (e *env) createJob(s jobSpec) {
	e.t.Helper()
	contacts := `{}`
	if s.contacts {
		contacts = `{"notified_on_job_deploy":["deploy@example.com"],"notified_on_job_failure_user_error":["oncall@example.com"]}`
	}
	body, err := json.Marshal(map[string]any{
		"job_name": s.name, "description": s.description,
		"config": map[string]any{"schedule": map[string]any{"schedule_cron": s.schedule}, "contacts": json.RawMessage(contacts)},
	})
	require.NoError(e.t, err)
	r := e.do("POST", "/data-jobs/for-team/"+s.team+"/jobs", string(body))
	require.Equal(e.t, http.StatusCreated, r.status, "%s", r.body)
}

// deploy posts a deployment through the REST API.
func (e *env) deploy(team, name, body string) {
	e.t.Helper()
	r := e.do("POST", "/data-jobs/for-team/"+team+"/jobs/"+name+"/deployments", body)
	require.Equal(e.t, http.StatusAccepted, r.status, "%s", r.body)
}

// undeploy deletes a deployment through the REST API.
func (e *env) undeploy(team, name string) {
	e.t.Helper()
	r := e.do("DELETE", "/data-jobs/for-team/"+team+"/jobs/"+name+"/deployments/release", "")
	require.Equal(e.t, http.StatusAccepted, r.status, "%s", r.body)
}

// sync records, as the synchronizer does, that the job's CronJob now matches its desired
// deployment.
func (e *env) sync(name string) {
	e.t.Helper()
	fence, st := e.leader(name)
	d := st.Desired
	wrote, err := e.store.RecordAppliedAll(e.t.Context(), fence, []job.ActualDeployment{{
		JobName: name, JobUID: st.Job.UID, Generation: st.Job.Generation, Team: st.Job.Team,
		DeploymentVersionSHA: "sha", JobVersion: d.JobVersion, VDKVersion: d.VDKVersion, PythonVersion: d.PythonVersion,
		Schedule: d.Schedule, Resources: job.Resources{CPURequestMillis: 1000, CPULimitMillis: 2000, MemoryRequestBytes: 500 << 20, MemoryLimitBytes: 1000 << 20},
		Enabled: d.Enabled, DeployedBy: d.DeployedBy, DeployedDate: d.DeployedDate,
	}})
	require.NoError(e.t, err)
	require.Equal(e.t, []bool{true}, wrote)
}

// fail records, as the synchronizer does, that applying the job's deployment failed.
func (e *env) fail(name string, status job.SyncStatus, message string) {
	e.t.Helper()
	fence, st := e.leader(name)
	wrote, err := e.store.RecordUnappliedStatus(e.t.Context(), fence, name, st.Job.UID, st.Job.Generation, status, message)
	require.NoError(e.t, err)
	require.True(e.t, wrote)
}

// leader takes the synchronizer's lease, as the leader does, and reads the job's state.
func (e *env) leader(name string) (job.Fence, job.SyncState) {
	e.t.Helper()
	ctx := e.t.Context()
	epoch, ok, err := e.store.TryAcquireLease(ctx, store.SyncLeaseName, "test", time.Hour)
	require.NoError(e.t, err)
	require.True(e.t, ok)
	st, err := e.store.LoadSyncState(ctx, name)
	require.NoError(e.t, err)
	return job.Fence{Epoch: epoch}, st
}

// sql runs a statement on the test database directly: executions have no write path yet.
func (e *env) sql(query string, args ...any) {
	e.t.Helper()
	conn, err := pgx.Connect(e.t.Context(), e.dbURL)
	require.NoError(e.t, err)
	defer conn.Close(context.WithoutCancel(e.t.Context()))
	_, err = conn.Exec(e.t.Context(), query, args...)
	require.NoError(e.t, err)
}

// lastExecution records a job's last execution on its row, as the executions feature will.
func (e *env) lastExecution(name, status string, end time.Time, seconds int) {
	e.t.Helper()
	e.sql(`UPDATE data_job SET last_execution_status = $2, last_execution_end_time = $3, last_execution_duration = $4 WHERE name = $1`,
		name, status, end, seconds)
}

// execution inserts an execution row.
func (e *env) execution(id, jobName, status string, start time.Time) {
	e.t.Helper()
	e.sql(`INSERT INTO data_job_execution (id, job_name, type, status, op_id, start_time, end_time, started_by,
		job_version, job_schedule, vdk_version, job_python_version, resources_cpu_request_millis, resources_memory_limit_bytes,
		last_deployed_date, last_deployed_by, message)
		VALUES ($1, $2, 'scheduled', $3, 'op-' || $1, $4::timestamptz, $4::timestamptz + interval '1 minute', 'scheduler', 'v1',
		'0 * * * *', '0.1', '3.11', 500, 1073741824, $4::timestamptz - interval '1 day', 'deployer', 'm')`, id, jobName, status, start)
}
