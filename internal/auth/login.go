package auth

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/datajobs/datajobs/internal/job"
)

// DefaultScopes are LoginConfig.Scopes' default, which --ui-oidc-scopes uses too.
func DefaultScopes() []string { return []string{oidc.ScopeOpenID} }

// LoginConfig configures the sign-in of people through a browser (the web console): the
// authorization-code flow with PKCE against one issuer.
type LoginConfig struct {
	// IssuerURL is the issuer people sign in with; it must be one the token verifier
	// trusts. Required.
	IssuerURL string
	// ClientID is the console's OAuth2 client at the issuer. Required.
	ClientID string
	// ClientSecret is empty for a public client (PKCE protects the code either way).
	ClientSecret string
	// Scopes are asked for (default "openid").
	Scopes []string
	// Audience is sent as the audience parameter, so that the access token is issued for
	// the API (default: the verifier's audience). Providers that do not know the
	// parameter ignore it.
	Audience string
	// HTTPClient talks to the issuer (default: a 10s timeout).
	HTTPClient *http.Client
}

// Login runs the authorization-code flow with PKCE and verifies the access token it ends
// with exactly as the REST API verifies a bearer token, so that a console session has the
// same identity and teams as the same person's API calls.
type Login struct {
	cfg    LoginConfig
	tokens *OIDC

	mu       sync.Mutex
	endpoint *oauth2.Endpoint
}

// NewLogin returns the sign-in flow of cfg whose tokens tokens verifies; it contacts the
// issuer only on the first sign-in.
func NewLogin(cfg LoginConfig, tokens *OIDC) (*Login, error) {
	if cfg.IssuerURL == "" || cfg.ClientID == "" {
		return nil, errors.New("console sign-in needs an issuer url and a client id (--ui-oidc-client-id)")
	}
	if tokens == nil {
		return nil, errors.New("console sign-in needs the token verifier of auth mode oidc")
	}
	if _, ok := tokens.issuers[cfg.IssuerURL]; !ok {
		return nil, fmt.Errorf("console issuer %q is not among the trusted issuers (--oidc-issuer-url)", cfg.IssuerURL)
	}
	if len(cfg.Scopes) == 0 {
		cfg.Scopes = DefaultScopes()
	}
	cfg.Audience = cmp.Or(cfg.Audience, tokens.cfg.Audience)
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	return &Login{cfg: cfg, tokens: tokens}, nil
}

// oauth2Config returns the client configuration for redirectURL, discovering the
// issuer's endpoints on first use.
func (l *Login) oauth2Config(ctx context.Context, redirectURL string) (*oauth2.Config, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.endpoint == nil {
		dctx, cancel := context.WithTimeout(oidc.ClientContext(ctx, l.cfg.HTTPClient), l.cfg.HTTPClient.Timeout)
		defer cancel()
		p, err := oidc.NewProvider(dctx, l.cfg.IssuerURL)
		if err != nil {
			return nil, job.Unavailable("identity provider", fmt.Errorf("discover oidc issuer %s: %w", l.cfg.IssuerURL, err))
		}
		e := p.Endpoint()
		l.endpoint = &e
	}
	return &oauth2.Config{
		ClientID: l.cfg.ClientID, ClientSecret: l.cfg.ClientSecret, Endpoint: *l.endpoint,
		RedirectURL: redirectURL, Scopes: l.cfg.Scopes,
	}, nil
}

// AuthCodeURL returns where to send the browser to sign in: state is echoed back to the
// redirect URL, verifier is the PKCE secret that Exchange must be given.
func (l *Login) AuthCodeURL(ctx context.Context, redirectURL, state, verifier string) (string, error) {
	c, err := l.oauth2Config(ctx, redirectURL)
	if err != nil {
		return "", err
	}
	return c.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("audience", l.cfg.Audience)), nil
}

// Exchange trades the code the issuer redirected back with for an access token and
// returns the identity that token proves and when it expires. Errors are domain errors
// and never include a token.
func (l *Login) Exchange(ctx context.Context, redirectURL, code, verifier string) (Identity, time.Time, error) {
	c, err := l.oauth2Config(ctx, redirectURL)
	if err != nil {
		return Identity{}, time.Time{}, err
	}
	tok, err := c.Exchange(context.WithValue(ctx, oauth2.HTTPClient, l.cfg.HTTPClient), code, oauth2.VerifierOption(verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) {
			return Identity{}, time.Time{}, job.Unauthenticated(fmt.Sprintf("The identity provider refused the sign-in code (%s).", cmp.Or(re.ErrorCode, re.Response.Status)))
		}
		return Identity{}, time.Time{}, job.Unavailable("identity provider", err)
	}
	return l.tokens.verify(ctx, tok.AccessToken)
}
