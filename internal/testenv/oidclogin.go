package testenv

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Sign-in of people through a browser (the web console): the test plays the provider's
// login and consent apps, which Hydra redirects the browser to at http://127.0.0.1:1/login
// and /consent (devenv.StartHydra), by accepting the challenges through the admin API.

// LoginAppURL is where Hydra sends a browser to log in or consent; nothing listens there,
// a test reads the challenge from the redirect (or intercepts the browser's request).
const LoginAppURL = "http://127.0.0.1:1/"

// NewBrowserClient registers a public authorization-code client with PKCE named id (an
// id a test picks, so that it can configure the service before registering) that may
// redirect to redirectURI and ask for the datajobs audience.
func (p *OIDCProvider) NewBrowserClient(t testing.TB, id, redirectURI string) {
	t.Helper()
	client := publicClient(redirectURI)
	client["client_id"] = id
	p.admin(t, http.MethodPost, "/admin/clients", client, nil)
}

// publicClient is the registration of a public authorization-code client (no secret)
// that may redirect to redirectURI and ask for a refresh token and the datajobs
// audience; without a client_id, Hydra picks one.
func publicClient(redirectURI string) map[string]any {
	return map[string]any{
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"redirect_uris":              []string{redirectURI},
		"scope":                      "openid offline_access",
		"audience":                   []string{Audience},
		"token_endpoint_auth_method": "none",
	}
}

// AcceptLogin accepts the login request of challenge as username and returns where the
// browser goes next.
func (p *OIDCProvider) AcceptLogin(t testing.TB, challenge, username string) string {
	t.Helper()
	var accepted struct {
		RedirectTo string `json:"redirect_to"`
	}
	p.admin(t, http.MethodPut, "/admin/oauth2/auth/requests/login/accept?login_challenge="+url.QueryEscape(challenge),
		map[string]any{"subject": username}, &accepted)
	return accepted.RedirectTo
}

// AcceptConsent grants the consent request of challenge the openid scope and the datajobs
// audience, with username and teams in the access token (claims "username" and
// "groups"), and returns where the browser goes next.
func (p *OIDCProvider) AcceptConsent(t testing.TB, challenge, username string, teams ...string) string {
	t.Helper()
	if teams == nil {
		teams = []string{}
	}
	var accepted struct {
		RedirectTo string `json:"redirect_to"`
	}
	p.admin(t, http.MethodPut, "/admin/oauth2/auth/requests/consent/accept?consent_challenge="+url.QueryEscape(challenge),
		map[string]any{
			"grant_scope":                 []string{"openid"},
			"grant_access_token_audience": []string{Audience},
			"session":                     map[string]any{"access_token": map[string]any{"groups": teams, "username": username}},
		}, &accepted)
	return accepted.RedirectTo
}

// SignIn walks a web sign-in that starts at start as browser b would (b keeps cookies
// and does not follow redirects itself: each one is followed here), playing the
// provider's login and consent apps for username in teams. It returns the body of the
// first page that is not a redirect, which must answer 200.
func (p *OIDCProvider) SignIn(t testing.TB, b *http.Client, start, username string, teams ...string) string {
	t.Helper()
	u := start
	for range 12 {
		if strings.HasPrefix(u, LoginAppURL) {
			q := mustParse(t, u).Query()
			if c := q.Get("login_challenge"); c != "" {
				u = p.AcceptLogin(t, c, username)
			} else {
				u = p.AcceptConsent(t, q.Get("consent_challenge"), username, teams...)
			}
			continue
		}
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
		require.NoError(t, err)
		resp, err := b.Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		if resp.StatusCode != http.StatusSeeOther && resp.StatusCode != http.StatusFound {
			require.Equal(t, http.StatusOK, resp.StatusCode, "GET %s: %s", u, body)
			return string(body)
		}
		u = mustParse(t, u).ResolveReference(mustParse(t, resp.Header.Get("Location"))).String()
	}
	t.Fatal("the sign-in did not end")
	return ""
}

// CSRFToken is the CSRF token of a web console page (its csrf-token meta element).
func CSRFToken(t testing.TB, page string) string {
	t.Helper()
	_, rest, ok := strings.Cut(page, `<meta name="csrf-token" content="`)
	require.True(t, ok, "the page has no CSRF token")
	token, _, _ := strings.Cut(rest, `"`)
	require.NotEmpty(t, token)
	return token
}

func mustParse(t testing.TB, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	require.NoError(t, err)
	return u
}
