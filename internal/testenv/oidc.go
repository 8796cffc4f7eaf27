package testenv

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/datajobs/datajobs/internal/devenv"
)

// Environment variables that name a running OIDC provider (Ory Hydra) to reuse;
// `datajobs dev --env-only` writes them into its env file when it started Hydra.
const (
	// EnvOIDCIssuer is the provider's issuer URL (public API).
	EnvOIDCIssuer = "DATAJOBS_TEST_OIDC_ISSUER"
	// EnvOIDCAdminURL is the provider's admin API URL.
	EnvOIDCAdminURL = "DATAJOBS_TEST_OIDC_ADMIN_URL"
)

// Audience is the audience the tokens of OIDCProvider's clients carry.
const Audience = "datajobs"

// WithOIDC makes Main provide a real OIDC provider (Ory Hydra, built by
// hack/hydra/build.sh) besides PostgreSQL.
func WithOIDC() Option { return func(o *options) { o.oidc = true } }

// hydraBin returns the hydra binary of the checkout, or "" when it is not built.
func hydraBin() string { return devenv.HydraBinary() }

// OIDCProvider is a running Hydra: clients and users with teams, and their tokens.
type OIDCProvider struct {
	// IssuerURL is what datajobs is configured with (--oidc-issuer-url).
	IssuerURL string
	// AdminURL is Hydra's admin API.
	AdminURL string
}

// OIDC returns the provider of this test binary. It skips t, saying why, when none runs:
// Hydra is not built (bash hack/hydra/build.sh) or the reused environment has none. Under
// make test (DATAJOBS_TEST_REQUIRE_OIDC=1, set by hack/test.sh, whose set-up builds Hydra)
// a missing provider fails instead: the suite never passes without its authentication tests.
func OIDC(t testing.TB) *OIDCProvider {
	t.Helper()
	h := get(t)
	if !h.opts.oidc {
		t.Fatal("testenv: this test needs OIDC: call testenv.Main(m, testenv.WithOIDC()) in this package's TestMain")
	}
	if h.oidc == nil && os.Getenv("DATAJOBS_TEST_REQUIRE_OIDC") == "1" {
		t.Fatal("testenv: no OIDC provider although DATAJOBS_TEST_REQUIRE_OIDC=1: hack/setup.sh should have built Ory Hydra (bash hack/hydra/build.sh)")
	}
	if h.oidc == nil {
		t.Skip("no OIDC provider: build Ory Hydra with `bash hack/hydra/build.sh` (hack/setup.sh does), or run the tests through hack/with-env.sh with a datajobs binary that starts it")
	}
	return h.oidc
}

// Client is an OAuth2 client of the provider.
type Client struct {
	ID, Secret string
}

// NewClient creates a client-credentials client whose tokens say username (claim
// "username"; "sub" is the client id) and teams (claim "groups").
func (p *OIDCProvider) NewClient(t testing.TB, username string, teams ...string) Client {
	t.Helper()
	if teams == nil {
		teams = []string{}
	}
	var c struct {
		ID     string `json:"client_id"`
		Secret string `json:"client_secret"`
	}
	p.admin(t, http.MethodPost, "/admin/clients", map[string]any{
		"grant_types":                []string{"client_credentials"},
		"audience":                   []string{Audience},
		"token_endpoint_auth_method": "client_secret_basic",
		"metadata":                   map[string]any{"teams": teams, "username": username},
	}, &c)
	return Client{ID: c.ID, Secret: c.Secret}
}

// Token returns a fresh access token (a JWT) of client c for the datajobs audience.
func (p *OIDCProvider) Token(t testing.TB, c Client) string {
	t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}, "audience": {Audience}}
	req, err := http.NewRequest(http.MethodPost, p.IssuerURL+"/oauth2/token", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(c.ID), url.QueryEscape(c.Secret))
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	do(t, req, http.StatusOK, &tok)
	return tok.AccessToken
}

// ClientToken creates a client for username in teams and returns a token of it.
func (p *OIDCProvider) ClientToken(t testing.TB, username string, teams ...string) string {
	t.Helper()
	return p.Token(t, p.NewClient(t, username, teams...))
}

// RotateKey adds a new signing key to the access-token key set: tokens issued from now
// on name a kid that no verifier has seen yet.
// Making an RSA key can outlive Hydra's 10 s write timeout on a busy machine: Hydra then
// drops the request but goes on making the key, so an error is followed by waiting for
// the key to appear in the set, not by another request (which would make another key).
func (p *OIDCProvider) RotateKey(t testing.TB) {
	t.Helper()
	const set = "/admin/keys/hydra.jwt.access-token"
	before := len(p.keyIDs(t, set))
	req, err := http.NewRequest(http.MethodPost, p.AdminURL+set, strings.NewReader(`{"alg":"RS256","use":"sig"}`))
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	deadline := time.Now().Add(3 * time.Minute)
	for len(p.keyIDs(t, set)) <= before {
		if time.Now().After(deadline) {
			t.Fatalf("testenv: hydra made no new key in %s", set)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// keyIDs lists the kids of a Hydra key set.
func (p *OIDCProvider) keyIDs(t testing.TB, set string) []string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, p.AdminURL+set, nil)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	var keys struct {
		Keys []struct {
			Kid string `json:"kid"`
		} `json:"keys"`
	}
	do(t, req, http.StatusOK, &keys)
	ids := make([]string, len(keys.Keys))
	for i, k := range keys.Keys {
		ids[i] = k.Kid
	}
	return ids
}

// UserLogin is the result of a user's authorization-code flow.
type UserLogin struct {
	// ClientID is the public client the user logged in with.
	ClientID string
	// RefreshToken is what `vdk login -t api-token` exchanges for access tokens.
	RefreshToken string
	// AccessToken is the first access token.
	AccessToken string
}

// UserRefreshToken runs the authorization-code flow for a user named username in teams:
// the test plays the browser and the login and consent apps, accepting both requests
// through Hydra's admin API. It returns the refresh token (scope offline_access).
func (p *OIDCProvider) UserRefreshToken(t testing.TB, username string, teams ...string) UserLogin {
	t.Helper()
	if teams == nil {
		teams = []string{}
	}
	return p.UserLoginWithGroups(t, username, teams)
}

// UserLoginWithGroups is UserRefreshToken with the access token's groups claim exactly as
// given: a list, or a string (as some providers send it), for the tests of how the teams
// claim is read.
func (p *OIDCProvider) UserLoginWithGroups(t testing.TB, username string, groups any) UserLogin {
	t.Helper()
	const redirect = "http://127.0.0.1:1/callback"
	var c struct {
		ID string `json:"client_id"`
	}
	p.admin(t, http.MethodPost, "/admin/clients", publicClient(redirect), &c)

	browser := &http.Client{
		Timeout:       30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Jar:           newJar(t),
	}
	// follow makes the browser request u and returns where it is redirected.
	follow := func(u string) *url.URL {
		t.Helper()
		resp, err := browser.Get(u)
		if err != nil {
			t.Fatalf("testenv: authorization flow: %v", err)
		}
		resp.Body.Close()
		loc, err := resp.Location()
		if err != nil {
			t.Fatalf("testenv: authorization flow: GET %s answered %s without a redirect", u, resp.Status)
		}
		return loc
	}
	q := url.Values{
		"client_id": {c.ID}, "response_type": {"code"}, "scope": {"openid offline_access"},
		"redirect_uri": {redirect}, "state": {"state-" + randomHex(8)}, "audience": {Audience},
	}
	loc := follow(p.IssuerURL + "/oauth2/auth?" + q.Encode())

	var accepted struct {
		RedirectTo string `json:"redirect_to"`
	}
	p.admin(t, http.MethodPut, "/admin/oauth2/auth/requests/login/accept?login_challenge="+url.QueryEscape(loc.Query().Get("login_challenge")),
		map[string]any{"subject": username}, &accepted)
	loc = follow(accepted.RedirectTo)
	p.admin(t, http.MethodPut, "/admin/oauth2/auth/requests/consent/accept?consent_challenge="+url.QueryEscape(loc.Query().Get("consent_challenge")),
		map[string]any{
			"grant_scope":                 []string{"openid", "offline_access"},
			"grant_access_token_audience": []string{Audience},
			"session":                     map[string]any{"access_token": map[string]any{"groups": groups, "username": username}},
		}, &accepted)
	loc = follow(accepted.RedirectTo)
	code := loc.Query().Get("code")
	if code == "" {
		t.Fatalf("testenv: authorization flow ended without a code: %s", loc.Redacted())
	}

	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirect}, "client_id": {c.ID}}
	req, err := http.NewRequest(http.MethodPost, p.IssuerURL+"/oauth2/token", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	var tok struct {
		AccessToken  string `json:"access_token"`
		RefreshToken string `json:"refresh_token"`
	}
	do(t, req, http.StatusOK, &tok)
	if tok.RefreshToken == "" {
		t.Fatal("testenv: the token endpoint gave no refresh token")
	}
	return UserLogin{ClientID: c.ID, RefreshToken: tok.RefreshToken, AccessToken: tok.AccessToken}
}

// admin calls Hydra's admin API with a JSON body and decodes the answer into out.
func (p *OIDCProvider) admin(t testing.TB, method, path string, body, out any) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	req, err := http.NewRequest(method, p.AdminURL+path, strings.NewReader(string(b)))
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	do(t, req, 0, out)
}

// do sends req and decodes a 2xx answer (or exactly want, when not 0) into out.
func do(t testing.TB, req *http.Request, want int, out any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("testenv: %s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if (want != 0 && resp.StatusCode != want) || (want == 0 && resp.StatusCode/100 != 2) {
		t.Fatalf("testenv: %s %s: %s: %s", req.Method, req.URL.Path, resp.Status, body)
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("testenv: %s %s: decode %s: %v", req.Method, req.URL.Path, body, err)
		}
	}
}

func newJar(t testing.TB) http.CookieJar {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return jar
}
