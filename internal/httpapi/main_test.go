package httpapi_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/graphapi"
	"github.com/datajobs/datajobs/internal/httpapi"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/secrets"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.WithOIDC()) }

// env is one API server on a fresh database.
type env struct {
	t      testing.TB
	url    string
	dbURL  string
	store  *store.Store
	logs   *syncBuffer
	client *http.Client
	// keyFile is the keyring file of the API's secrets (secrets_test.go rotates it).
	keyFile string
}

type options struct {
	jobsQuery http.Handler
	storeURL  string // a store on another URL (e.g. a database that is down)
	sources   service.SourcesConfig
	api       httpapi.Config // JobsQuery, Auth and Webhook are set from the fields below
	quotas    store.TeamQuotas
	auth      httpapi.Authenticator
	webhook   httpapi.Authorizer
	graphql   bool // serve the GraphQL jobs query (graphapi) from the store
	// logs reads the logs of running executions (default none: only stored copies).
	logs service.LogReader
	// statementTimeout is the API store's PostgreSQL statement timeout (0: none).
	statementTimeout time.Duration
	// webhookAllowPrivate accepts team webhook URLs on private addresses.
	webhookAllowPrivate bool
	// maxSecretsBytes caps a job's secrets (0: the default 1 MiB).
	maxSecretsBytes int
}

func newEnv(t testing.TB, opts ...func(*options)) *env {
	t.Helper()
	var o options
	for _, f := range opts {
		f(&o)
	}
	dbURL := testenv.DatabaseURL(t)
	st := openStore(t, dbURL)
	apiStore := st
	if o.storeURL != "" || o.quotas != (store.TeamQuotas{}) || o.statementTimeout != 0 {
		apiStore = openStoreWith(t, store.Config{URL: cmp.Or(o.storeURL, dbURL), Quotas: o.quotas, StatementTimeout: o.statementTimeout})
	}
	keyFile := testenv.SecretsKeyFile(t)
	keys, err := secrets.LoadKeyring(keyFile)
	require.NoError(t, err)
	svc, err := service.New(service.Config{
		Keys:                    keys,
		SupportedPythonVersions: []string{"3.9", "3.11"},
		DefaultPythonVersion:    "3.11",
		APIVersion:              "datajobs/test",
		Sources:                 o.sources,
		Logs:                    o.logs,
		MaxExecutionTimeout:     24 * time.Hour,
		WebhookAllowPrivate:     o.webhookAllowPrivate,
		Resources: job.ResourceBounds{
			Max: job.Resources{CPURequestMillis: 4000, CPULimitMillis: 8000, MemoryRequestBytes: 8 << 30, MemoryLimitBytes: 16 << 30},
		},
	}, apiStore)
	require.NoError(t, err)
	logs := &syncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	cfg := o.api
	cfg.JobsQuery, cfg.Auth, cfg.Webhook = o.jobsQuery, o.auth, o.webhook
	if o.graphql {
		cfg.JobsQuery, err = graphapi.New(graphapi.Config{Logger: slog.New(slog.DiscardHandler), Webhook: o.webhook}, svc)
		require.NoError(t, err)
	}
	cfg.Secrets = service.NewSecrets(apiStore, keys, o.maxSecretsBytes)
	h := httpapi.New(cfg, svc, logger)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		if t.Failed() {
			logs.mu.Lock()
			defer logs.mu.Unlock()
			t.Logf("server logs:\n%s", logs.buf.String())
		}
	})
	return &env{t: t, url: srv.URL, dbURL: dbURL, store: st, logs: logs, client: srv.Client(), keyFile: keyFile}
}

func openStore(t testing.TB, url string) *store.Store {
	t.Helper()
	return openStoreWith(t, store.Config{URL: url})
}

func openStoreWith(t testing.TB, cfg store.Config) *store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(st.Close)
	return st
}

// response is what a client sees.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t testing.TB, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal(r.body, v), "body: %s", r.body)
}

// vdkError decodes and checks a VDK error body.
func (r response) vdkError(t testing.TB) map[string]string {
	t.Helper()
	var e map[string]string
	r.json(t, &e)
	for _, k := range []string{"what", "why", "consequences", "countermeasures"} {
		require.NotEmpty(t, e[k], "error body lacks %s: %s", k, r.body)
	}
	return e
}

func (e *env) do(method, path, body string, headers ...string) response {
	e.t.Helper()
	return e.doCtx(e.t.Context(), method, path, body, headers...)
}

func (e *env) doCtx(ctx context.Context, method, path, body string, headers ...string) response {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.url+path, rd)
	require.NoError(e.t, err)
	if body != "" { // as the VDK client sends them
		ct := "application/json"
		if strings.HasSuffix(req.URL.Path, "/sources") {
			ct = "application/octet-stream"
		}
		req.Header.Set("Content-Type", ct)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := e.client.Do(req)
	require.NoError(e.t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(e.t, err)
	return response{status: res.StatusCode, header: res.Header, body: b}
}

// createJob creates a job with a schedule and returns its path.
func (e *env) createJob(team, name string) string {
	e.t.Helper()
	r := e.do("POST", "/data-jobs/for-team/"+team+"/jobs",
		`{"job_name":"`+name+`","description":"d","config":{"schedule":{"schedule_cron":"15 10 * * *"},"contacts":{"notified_on_job_deploy":["a@example.com"]}}}`)
	require.Equal(e.t, http.StatusCreated, r.status, "%s", r.body)
	return "/data-jobs/for-team/" + team + "/jobs/" + name
}

// deploy posts a deployment and requires 202.
func (e *env) deploy(jobPath, body string, headers ...string) {
	e.t.Helper()
	r := e.do("POST", jobPath+"/deployments", body, headers...)
	require.Equal(e.t, http.StatusAccepted, r.status, "%s", r.body)
}

// deployment reads the deployment of a job through the API.
func (e *env) deployment(jobPath string) map[string]any {
	e.t.Helper()
	r := e.do("GET", jobPath+"/deployments/release", "")
	require.Equal(e.t, http.StatusOK, r.status, "%s", r.body)
	var d map[string]any
	r.json(e.t, &d)
	return d
}

// sql runs statements on the test database directly, as the synchronizer would.
func (e *env) sql(query string, args ...any) {
	e.t.Helper()
	conn, err := pgx.Connect(e.t.Context(), e.dbURL)
	require.NoError(e.t, err)
	defer conn.Close(context.WithoutCancel(e.t.Context()))
	_, err = conn.Exec(e.t.Context(), query, args...)
	require.NoError(e.t, err)
}

// generation reads a job's generation.
func (e *env) generation(name string) int64 {
	e.t.Helper()
	conn, err := pgx.Connect(e.t.Context(), e.dbURL)
	require.NoError(e.t, err)
	defer conn.Close(context.WithoutCancel(e.t.Context()))
	var g int64
	require.NoError(e.t, conn.QueryRow(e.t.Context(), `SELECT generation FROM data_job WHERE name = $1`, name).Scan(&g))
	return g
}

// query reads one row of a query on the test database into dest.
func (e *env) query(query string, args []any, dest ...any) {
	e.t.Helper()
	conn, err := pgx.Connect(e.t.Context(), e.dbURL)
	require.NoError(e.t, err)
	defer conn.Close(context.WithoutCancel(e.t.Context()))
	require.NoError(e.t, conn.QueryRow(e.t.Context(), query, args...).Scan(dest...))
}

// syncBuffer is a log sink safe for concurrent handlers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the JSON log records written so far.
func (b *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(b.buf.Bytes()), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal(l, &m))
		out = append(out, m)
	}
	return out
}
