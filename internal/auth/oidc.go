package auth

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/datajobs/datajobs/internal/job"
)

// SigningAlgorithms are the only token signature algorithms accepted: asymmetric ones, so
// that neither "none" nor an HMAC keyed with a public key can pass.
var SigningAlgorithms = []string{
	oidc.RS256, oidc.RS384, oidc.RS512,
	oidc.ES256, oidc.ES384, oidc.ES512,
	oidc.PS256, oidc.PS384, oidc.PS512,
}

// The defaults of OIDCConfig that the flags of `datajobs serve` use too.
const (
	DefaultAudience      = "datajobs"
	DefaultUsernameClaim = "sub"
	DefaultTeamsClaim    = "groups"
)

// OIDCConfig configures the verifier of access tokens.
type OIDCConfig struct {
	// IssuerURLs are the trusted issuers; each is discovered through
	// <issuer>/.well-known/openid-configuration. At least one is required.
	IssuerURLs []string
	// Audience must be among a token's aud values (default "datajobs").
	Audience string
	// UsernameClaim names the claim recorded as the caller's username (default "sub").
	UsernameClaim string
	// TeamsClaim names the claim holding the caller's teams, a list of strings (each
	// element one team, compared whole) or a string (default "groups").
	TeamsClaim string
	// TeamsSeparator splits a string teams claim into teams (default "": a string claim is
	// one team). A list claim is never split: its element "Data Platform" is not the teams
	// "data" and "platform".
	TeamsSeparator string
	// AdminTeams are teams whose members act on every team (compared case-insensitively).
	AdminTeams []string
	// KeySetMinInterval is the least time between two fetches of an issuer's key set: a
	// token naming a key the set does not hold makes a fetch only when the last one is
	// older (default 30s), so forged tokens cannot make the service fetch once each.
	KeySetMinInterval time.Duration
	// Logger receives the teams-claim elements ignored because they are no team name, each
	// logged once (default slog.Default()).
	Logger *slog.Logger
	// ClockSkew is tolerated on exp (go-oidc allows five minutes on nbf) (default 30s).
	ClockSkew time.Duration
	// HTTPClient fetches discovery documents and key sets (default: a 10s timeout).
	HTTPClient *http.Client
	// RetryDiscoveryAfter is how long a failed discovery is remembered before the next
	// request tries again (default 5s).
	RetryDiscoveryAfter time.Duration
	// CacheTTL is how long a verified token is remembered (never past its exp), so that a
	// client's repeated requests with one token cost a hash, not an RSA verification
	// (default 1m; negative: no cache).
	CacheTTL time.Duration
	// CacheSize bounds the remembered tokens (default 10,000).
	CacheSize int
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// OIDC verifies bearer access tokens of several issuers: signature by a key of the
// issuer's JWKS (fetched again when a token names an unknown kid, at most once per
// KeySetMinInterval), iss, aud, exp and nbf,
// and an algorithm allowlist. Issuers are discovered on first use, so that the service
// starts while the identity provider is down.
type OIDC struct {
	cfg     OIDCConfig
	base    context.Context // carries the HTTP client for go-oidc
	issuers map[string]*issuer

	mu       sync.Mutex
	verified map[[sha256.Size]byte]verifiedToken
	// ignored are the teams-claim elements already logged as ignored.
	ignored sync.Map
	// ignoredCount bounds ignored.
	ignoredCount atomic.Int64
}

// verifiedToken is a token that passed verification, by the hash of its text.
type verifiedToken struct {
	id            Identity
	expiry, until time.Time
}

type issuer struct {
	url string

	mu       sync.Mutex
	verifier *oidc.IDTokenVerifier
	failedAt time.Time
	err      error
}

// NewOIDC returns a verifier for cfg; it contacts no issuer yet.
func NewOIDC(cfg OIDCConfig) (*OIDC, error) {
	cfg.Audience = cmp.Or(cfg.Audience, DefaultAudience)
	cfg.UsernameClaim = cmp.Or(cfg.UsernameClaim, DefaultUsernameClaim)
	cfg.TeamsClaim = cmp.Or(cfg.TeamsClaim, DefaultTeamsClaim)
	cfg.ClockSkew = cmp.Or(cfg.ClockSkew, 30*time.Second)
	cfg.RetryDiscoveryAfter = cmp.Or(cfg.RetryDiscoveryAfter, 5*time.Second)
	cfg.CacheTTL = cmp.Or(cfg.CacheTTL, time.Minute)
	cfg.CacheSize = cmp.Or(cfg.CacheSize, 10_000)
	cfg.KeySetMinInterval = cmp.Or(cfg.KeySetMinInterval, 30*time.Second)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	for i, t := range cfg.AdminTeams {
		cfg.AdminTeams[i] = strings.ToLower(strings.TrimSpace(t))
	}
	o := &OIDC{
		cfg: cfg, base: oidc.ClientContext(context.Background(), cfg.HTTPClient), issuers: map[string]*issuer{},
		verified: map[[sha256.Size]byte]verifiedToken{},
	}
	for _, u := range cfg.IssuerURLs {
		u = strings.TrimSpace(u)
		if u == "" {
			continue
		}
		if !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") {
			return nil, fmt.Errorf("oidc issuer url %q: must be an http(s) URL", u)
		}
		o.issuers[u] = &issuer{url: u}
	}
	if len(o.issuers) == 0 {
		return nil, errors.New("auth mode oidc needs at least one issuer: set --oidc-issuer-url (DATAJOBS_OIDC_ISSUER_URL) to your identity provider's issuer URL, or --auth-mode none on a trusted network")
	}
	return o, nil
}

// Authenticate returns the caller of r from its Authorization: Bearer token. Its errors
// are domain errors: Unauthenticated for a missing or invalid token, Unavailable when the
// token's issuer cannot be discovered. They never include the token.
func (o *OIDC) Authenticate(r *http.Request) (Identity, error) {
	raw, ok := bearer(r)
	if !ok {
		return Identity{}, job.Unauthenticated("The Authorization header must carry a bearer token.")
	}
	key := sha256.Sum256([]byte(raw))
	now := o.cfg.Now()
	o.mu.Lock()
	hit, ok := o.verified[key]
	o.mu.Unlock()
	if ok && now.Before(hit.until) && now.Add(-o.cfg.ClockSkew).Before(hit.expiry) {
		return hit.id, nil
	}
	id, expiry, err := o.verify(r.Context(), raw)
	if err != nil || o.cfg.CacheTTL < 0 {
		return id, err
	}
	o.mu.Lock()
	if len(o.verified) >= o.cfg.CacheSize {
		clear(o.verified) // a simple bound: the next requests verify again
	}
	o.verified[key] = verifiedToken{id: id, expiry: expiry, until: now.Add(o.cfg.CacheTTL)}
	o.mu.Unlock()
	return id, nil
}

// verify checks raw fully and returns its caller and expiry.
func (o *OIDC) verify(ctx context.Context, raw string) (Identity, time.Time, error) {
	iss, err := unverifiedIssuer(raw)
	if err != nil {
		return Identity{}, time.Time{}, job.Unauthenticated("The bearer token is not a well-formed JWT.")
	}
	is, ok := o.issuers[iss]
	if !ok {
		return Identity{}, time.Time{}, job.Unauthenticated("The token's issuer is not trusted by this service.")
	}
	v, err := o.verifier(ctx, is)
	if err != nil {
		return Identity{}, time.Time{}, job.Unavailable("identity provider", err)
	}
	tok, err := v.Verify(ctx, raw)
	if err != nil {
		return Identity{}, time.Time{}, notVerified(err, "Get a new token from a trusted issuer for audience "+o.cfg.Audience+".")
	}
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return Identity{}, time.Time{}, job.Unauthenticated("The token's claims are not a JSON object.")
	}
	id := Identity{Teams: o.teams(ctx, claims[o.cfg.TeamsClaim]), Verified: true}
	id.Username, _ = claims[o.cfg.UsernameClaim].(string)
	if id.Username == "" {
		return Identity{}, time.Time{}, job.Unauthenticated(fmt.Sprintf("The token has no %q claim to name the caller.", o.cfg.UsernameClaim))
	}
	id.Admin = slices.ContainsFunc(id.Teams, func(t string) bool { return slices.Contains(o.cfg.AdminTeams, t) })
	return id, tok.Expiry, nil
}

// verifier returns the issuer's verifier, discovering it first if needed. A failed
// discovery is not tried again for RetryDiscoveryAfter, so that a down provider does not
// get one request per API call.
func (o *OIDC) verifier(ctx context.Context, is *issuer) (*oidc.IDTokenVerifier, error) {
	is.mu.Lock()
	defer is.mu.Unlock()
	if is.verifier != nil {
		return is.verifier, nil
	}
	if is.err != nil && o.cfg.Now().Sub(is.failedAt) < o.cfg.RetryDiscoveryAfter {
		return nil, is.err
	}
	// Discovery has its own timeout, so that a request that gives up early does not leave
	// a half-made verifier; the request's end ends it too.
	dctx, cancel := context.WithTimeout(o.base, o.cfg.HTTPClient.Timeout)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel) // the request's end ends the discovery
	defer stop()
	p, err := oidc.NewProvider(dctx, is.url)
	if err != nil {
		is.failedAt, is.err = o.cfg.Now(), fmt.Errorf("discover oidc issuer %s: %w", is.url, err)
		return nil, is.err
	}
	// The key set outlives this call and fetches with its own timeout (keySet.download).
	var meta struct {
		JWKSURL string `json:"jwks_uri"`
	}
	if err := p.Claims(&meta); err != nil || meta.JWKSURL == "" {
		is.failedAt, is.err = o.cfg.Now(), fmt.Errorf("discover oidc issuer %s: no jwks_uri", is.url)
		return nil, is.err
	}
	keys := newKeySet(meta.JWKSURL, o.cfg.HTTPClient, o.cfg.Now, o.cfg.KeySetMinInterval)
	is.verifier = oidc.NewVerifier(is.url, keys, &oidc.Config{
		ClientID:             o.cfg.Audience,
		SupportedSigningAlgs: SigningAlgorithms,
		Now:                  func() time.Time { return o.cfg.Now().Add(-o.cfg.ClockSkew) },
	})
	is.err = nil
	return is.verifier, nil
}

// bearer returns the token of an Authorization: Bearer header.
func bearer(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	return token, ok && strings.EqualFold(scheme, "Bearer") && token != ""
}

// unverifiedIssuer reads the iss claim of a JWT without verifying it, only to pick the
// issuer whose keys then verify the whole token.
func unverifiedIssuer(raw string) (string, error) {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return "", errors.New("not a compact JWS")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", err
	}
	var c struct {
		Issuer string `json:"iss"`
	}
	if err := json.Unmarshal(payload, &c); err != nil {
		return "", err
	}
	return c.Issuer, nil
}

// teams reads a teams claim: each element of a list is one team, compared whole in lower
// case as team names are stored; a string is one team, or several when TeamsSeparator is
// set. An element that is no valid team name (such as the group "Data Platform") is
// ignored, never split into teams it does not name, and logged once.
func (o *OIDC) teams(ctx context.Context, v any) []string {
	var elems []string
	split := false // parts of a split string may have spaces around them
	switch v := v.(type) {
	case string:
		elems = []string{v}
		if o.cfg.TeamsSeparator != "" {
			elems, split = strings.Split(v, o.cfg.TeamsSeparator), true
		}
	case []any:
		for _, e := range v {
			if s, ok := e.(string); ok {
				elems = append(elems, s)
			}
		}
	}
	out := make([]string, 0, len(elems))
	for _, e := range elems {
		t := strings.ToLower(e)
		if split {
			t = strings.TrimSpace(t)
		}
		if split && t == "" {
			continue // "a,,b" or a trailing separator
		}
		if job.ValidateTeam(t) != nil {
			o.logIgnored(ctx, e)
			continue
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// maxIgnoredLogged bounds the distinct ignored elements remembered as logged.
const maxIgnoredLogged = 1000

// logIgnored logs an ignored teams-claim element the first time it is seen.
func (o *OIDC) logIgnored(ctx context.Context, elem string) {
	if o.ignoredCount.Load() >= maxIgnoredLogged {
		return
	}
	if _, seen := o.ignored.LoadOrStore(elem, true); seen {
		return
	}
	o.ignoredCount.Add(1)
	o.cfg.Logger.WarnContext(ctx, "oidc_teams_claim_element_ignored",
		"claim", o.cfg.TeamsClaim, "element", elem,
		"detail", "not a team name (a DNS label); a list element is one team, never split")
}
