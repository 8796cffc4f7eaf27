package ui_test

import (
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/auth"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/secrets"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/slots"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testenv"
	"github.com/datajobs/datajobs/internal/ui"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.WithOIDC()) }

// env is the console on a fresh database, served over HTTP, with a job of team-a and a
// deployed job of team-b (with properties and an execution).
type env struct {
	url      string
	dbURL    string // the database, for writing rows as the leader would
	store    *store.Store
	svc      *service.Service
	console  *ui.Console
	logReads *slots.Slots          // shared with the REST API in the server
	secrets  *service.Secrets      // the job secrets, with a key file of the test's own
	provider *testenv.OIDCProvider // nil in auth mode none
}

func newEnv(t *testing.T, oidc bool, opts ...func(*ui.Config)) *env {
	t.Helper()
	dbURL := testenv.DatabaseURL(t)
	st, err := store.Open(t.Context(), store.Config{URL: dbURL})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	svc, err := service.New(service.Config{}, st)
	require.NoError(t, err)
	e := &env{store: st, svc: svc, dbURL: dbURL}
	mux := http.NewServeMux()
	srv := httptest.NewUnstartedServer(mux)
	e.url = "http://" + srv.Listener.Addr().String()
	cfg := ui.Config{Sessions: st, PublicURL: e.url}
	// Unique per run: Hydra keeps its clients across runs of a test (-count > 1).
	clientID := "console-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")) + "-" + strconv.FormatUint(rand.Uint64(), 36)
	if oidc {
		e.provider = testenv.OIDC(t)
		verifier, err := auth.NewOIDC(auth.OIDCConfig{
			IssuerURLs: []string{e.provider.IssuerURL}, Audience: testenv.Audience,
			UsernameClaim: "username", AdminTeams: []string{"platform"},
		})
		require.NoError(t, err)
		login, err := auth.NewLogin(auth.LoginConfig{IssuerURL: e.provider.IssuerURL, ClientID: clientID}, verifier)
		require.NoError(t, err)
		cfg.Login = login
	}
	cfg.Logger = slog.New(slog.DiscardHandler)
	// No wait for a slot: a read past the bound is refused at once, as the test of the
	// shared slots expects.
	e.logReads = slots.New(slots.Config{
		Kind: "log_reads", What: "execution log reads", Flag: "--max-concurrent-log-reads", Limit: 4,
		CallerFlag: "--max-concurrent-log-reads-per-caller", PerCaller: 1,
	}, slots.Queue{Wait: -1})
	cfg.LogReads = e.logReads
	keys, err := secrets.LoadKeyring(testenv.SecretsKeyFile(t))
	require.NoError(t, err)
	e.secrets = service.NewSecrets(st, keys, 0)
	cfg.Secrets = e.secrets
	for _, o := range opts {
		o(&cfg)
	}
	e.console, err = ui.New(cfg, svc)
	require.NoError(t, err)
	mux.Handle(ui.Prefix, e.console)
	srv.Start()
	t.Cleanup(srv.Close)
	if oidc {
		e.provider.NewBrowserClient(t, clientID, e.url+"/ui/callback")
	}

	ctx := t.Context()
	_, err = svc.CreateJob(ctx, "team-a", job.Job{Name: "job-of-a", Description: "ingests the sales of a", Schedule: "0 6 * * *"})
	require.NoError(t, err)
	_, err = svc.CreateJob(ctx, "team-b", job.Job{Name: "job-of-b", Description: "secret plans of b", Schedule: "*/15 * * * *"})
	require.NoError(t, err)
	v1 := "v1-of-b"
	_, err = svc.Deploy(ctx, "team-b", "job-of-b", job.DeploymentChange{JobVersion: &v1}, "bob")
	require.NoError(t, err)
	require.NoError(t, svc.SetProperties(ctx, "team-b", "job-of-b", []byte(`{"secret":"of-b"}`)))
	_, err = svc.StartExecution(ctx, "team-b", "job-of-b", service.ExecutionRequest{}, "bob", "op-1")
	require.NoError(t, err)
	return e
}

// browser is an HTTP client with cookies that does not follow redirects by itself.
type browser struct {
	t      *testing.T
	client *http.Client
	base   string
}

func (e *env) browser(t *testing.T) *browser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &browser{t: t, base: e.url, client: &http.Client{
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

type response struct {
	status int
	header http.Header
	body   string
}

func (b *browser) do(method, path string, form url.Values, headers ...string) response {
	b.t.Helper()
	u := path
	if strings.HasPrefix(path, "/") {
		u = b.base + path
	}
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(b.t.Context(), method, u, body)
	require.NoError(b.t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := b.client.Do(req)
	require.NoError(b.t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(b.t, err)
	return response{status: resp.StatusCode, header: resp.Header, body: string(out)}
}

func (b *browser) get(path string, headers ...string) response {
	b.t.Helper()
	return b.do(http.MethodGet, path, nil, headers...)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
