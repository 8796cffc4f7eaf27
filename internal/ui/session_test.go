package ui_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/auth"
	"github.com/datajobs/datajobs/internal/testenv"
	"github.com/datajobs/datajobs/internal/ui"
)

// Issue 22: sign-out only cleared the cookie in that browser; a copy of the sealed cookie
// (a shared machine, a proxy log, malware) kept signing in until it expired, up to 12 h.
// Now the session is a database row: sign-out deletes it, and the copy is refused at once.
func TestSignOutEndsACopiedSessionCookieToo(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	b := e.browser(t)
	page := e.provider.SignIn(t, b.client, e.url+"/ui/", "alice", "team-a")
	require.Contains(t, page, "job-of-a")
	token := testenv.CSRFToken(t, page)

	thief := e.browser(t)
	u := must(url.Parse(e.url + "/ui/"))
	thief.client.Jar.SetCookies(u, b.client.Jar.Cookies(u))
	require.Equal(t, http.StatusOK, thief.get("/ui/").status, "the copy works while the session lasts")

	r := b.do(http.MethodPost, "/ui/logout", url.Values{"csrf": {token}})
	require.Equal(t, http.StatusOK, r.status, r.body)
	r = thief.get("/ui/")
	assert.Equal(t, http.StatusSeeOther, r.status, "the copied cookie signs nobody in after sign-out")
	assert.Contains(t, r.header.Get("Location"), "/ui/login")
}

// Issue 22: the teams of a session were those of its sign-in until it expired, so someone
// taken out of a team kept it in the console for hours. A new sign-in of the same user
// writes what the identity provider asserts now to every session of that user at once.
func TestANewSignInChangesTheTeamsOfEveryOpenSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	first := e.browser(t)
	page := e.provider.SignIn(t, first.client, e.url+"/ui/", "alice", "team-a")
	require.Contains(t, page, "job-of-a")

	second := e.browser(t)
	page = e.provider.SignIn(t, second.client, e.url+"/ui/", "alice", "team-b")
	require.Contains(t, page, "job-of-b")
	require.NotContains(t, page, "job-of-a")

	r := first.get("/ui/")
	require.Equal(t, http.StatusOK, r.status)
	assert.NotContains(t, r.body, "job-of-a", "team-a was taken away: the older session lost it too")
	assert.Contains(t, r.body, "job-of-b")
	r = first.get("/ui/teams/team-a/jobs/job-of-a")
	assert.Equal(t, http.StatusForbidden, r.status)
}

// Issue 22: the sign-in redirect URI was made from the request's Host header, so a sign-in
// started through a forged Host sent the authorization code to that host. The console
// now refuses to start with sign-in but without a fixed --ui-public-url (https, or http
// on a loopback address only), and a forged Host changes nothing of the redirect.
func TestSignInRedirectsOnlyToThePublicURL(t *testing.T) {
	t.Parallel()
	p := testenv.OIDC(t)
	verifier, err := auth.NewOIDC(auth.OIDCConfig{IssuerURLs: []string{p.IssuerURL}, Audience: testenv.Audience, UsernameClaim: "username"})
	require.NoError(t, err)
	login, err := auth.NewLogin(auth.LoginConfig{IssuerURL: p.IssuerURL, ClientID: "console-redirect"}, verifier)
	require.NoError(t, err)
	st := testenv.Store(t)
	for _, bad := range []string{"", "http://datajobs.example.com", "https://datajobs.example.com/some/path", "datajobs.example.com", "https://datajobs.example.com/?next=x"} {
		_, err := ui.New(ui.Config{Login: login, Sessions: st, PublicURL: bad}, nil)
		require.Error(t, err, "public URL %q", bad)
		require.Contains(t, err.Error(), "--ui-public-url")
	}
	_, err = ui.New(ui.Config{Login: login, PublicURL: "https://datajobs.example.com"}, nil)
	require.Error(t, err, "no session store")

	c, err := ui.New(ui.Config{Login: login, Sessions: st, PublicURL: "https://datajobs.example.com/", Logger: slog.New(slog.DiscardHandler)}, nil)
	require.NoError(t, err)
	req := httptest.NewRequest(http.MethodGet, "/ui/login", nil)
	req.Host = "attacker.example.net"
	w := httptest.NewRecorder()
	c.ServeHTTP(w, req)
	require.Equal(t, http.StatusSeeOther, w.Code, w.Body.String())
	to := must(url.Parse(w.Header().Get("Location")))
	assert.Equal(t, "https://datajobs.example.com/ui/callback", to.Query().Get("redirect_uri"))
	assert.NotContains(t, w.Header().Get("Location"), "attacker")

	// Over https the cookies are __Host- cookies: Secure, path /, no Domain, so no
	// other host of the domain can plant or overwrite them.
	ck := w.Result().Cookies()
	require.Len(t, ck, 1)
	assert.Equal(t, "__Host-datajobs_console_login", ck[0].Name)
	assert.Equal(t, "/", ck[0].Path)
	assert.True(t, ck[0].Secure)
	assert.Empty(t, ck[0].Domain)
}

// The session cookie of auth mode none over TLS is a __Host- cookie as well.
func TestConsoleOverTLSSetsHostPrefixedCookies(t *testing.T) {
	t.Parallel()
	c, err := ui.New(ui.Config{Logger: slog.New(slog.DiscardHandler)}, nil)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle(ui.Prefix, c)
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/ui/logout", strings.NewReader(""))
	require.NoError(t, err)
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	var names []string
	for _, ck := range resp.Cookies() {
		names = append(names, ck.Name)
		assert.True(t, ck.Secure)
		assert.Equal(t, "/", ck.Path)
	}
	assert.Equal(t, []string{"__Host-datajobs_console"}, names)
}
