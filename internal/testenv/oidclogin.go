package testenv

import (
	"net/http"
	"net/url"
	"testing"
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
	p.admin(t, http.MethodPost, "/admin/clients", map[string]any{
		"client_id":                  id,
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"redirect_uris":              []string{redirectURI},
		"scope":                      "openid offline_access",
		"audience":                   []string{Audience},
		"token_endpoint_auth_method": "none",
	}, nil)
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
