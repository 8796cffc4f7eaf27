package auth

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/datajobs/datajobs/internal/job"
)

// IssuerConfig configures a TokenVerifier for one issuer whose discovery the caller did
// itself (Kubernetes' ServiceAccount issuer: its iss is often a name the service cannot
// reach, such as https://kubernetes.default.svc, while the apiserver serves its keys).
type IssuerConfig struct {
	// Issuer is the iss every token must carry. Required.
	Issuer string
	// Audience must be among a token's aud values. Required.
	Audience string
	// FetchKeys returns the issuer's JSON Web Key Set document. Required.
	FetchKeys func(ctx context.Context) ([]byte, error)
	// KeySetMinInterval is the least time between two fetches (default 30s), as
	// OIDCConfig's.
	KeySetMinInterval time.Duration
	// ClockSkew is tolerated on exp (default 30s).
	ClockSkew time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// TokenVerifier verifies the JWTs of one issuer with the same checks as OIDC: signature
// by a published key (fetched again for an unknown kid at most once per interval), iss,
// aud, exp, nbf and the algorithm allowlist.
type TokenVerifier struct {
	cfg      IssuerConfig
	verifier *oidc.IDTokenVerifier
}

// NewTokenVerifier returns a verifier for cfg; it fetches no key yet.
func NewTokenVerifier(cfg IssuerConfig) (*TokenVerifier, error) {
	if cfg.Issuer == "" || cfg.Audience == "" || cfg.FetchKeys == nil {
		return nil, errors.New("token verifier: issuer, audience and key fetch are required")
	}
	cfg.KeySetMinInterval = cmp.Or(cfg.KeySetMinInterval, 30*time.Second)
	cfg.ClockSkew = cmp.Or(cfg.ClockSkew, 30*time.Second)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	keys := newKeySet(cfg.Issuer, nil, cfg.Now, cfg.KeySetMinInterval)
	keys.fetch = cfg.FetchKeys
	v := oidc.NewVerifier(cfg.Issuer, keys, &oidc.Config{
		ClientID:             cfg.Audience,
		SupportedSigningAlgs: SigningAlgorithms,
		Now:                  func() time.Time { return cfg.Now().Add(-cfg.ClockSkew) },
	})
	return &TokenVerifier{cfg: cfg, verifier: v}, nil
}

// Issuer is the iss the verifier accepts.
func (v *TokenVerifier) Issuer() string { return v.cfg.Issuer }

// Verify checks raw and decodes its claims into claims; it returns the token's expiry.
// Its errors are Unauthenticated domain errors that never include the token.
func (v *TokenVerifier) Verify(ctx context.Context, raw string, claims any) (time.Time, error) {
	tok, err := v.verifier.Verify(ctx, raw)
	if err != nil {
		return time.Time{}, notVerified(err, "Use a token of audience "+v.cfg.Audience+".")
	}
	if err := tok.Claims(claims); err != nil {
		return time.Time{}, job.Unauthenticated("The token's claims are not in the expected form.")
	}
	return tok.Expiry, nil
}

// notVerified is the Unauthenticated error of a token go-oidc refused (err, kept for
// the log): expired, or not verified, which countermeasures says how to get past.
func notVerified(err error, countermeasures string) *job.Error {
	var expired *oidc.TokenExpiredError
	if errors.As(err, &expired) {
		return job.Unauthenticated("The token has expired.")
	}
	return &job.Error{
		Kind: job.KindUnauthenticated, Err: err,
		What: "The request is not authenticated.", Why: "The token did not pass verification (signature, issuer, audience or algorithm).",
		Consequences: "The request was not processed and nothing was changed.", Countermeasures: countermeasures,
	}
}

// UnverifiedIssuer reads the iss claim of a JWT without verifying it, only to pick the
// verifier of that issuer; "" when raw is no JWT.
func UnverifiedIssuer(raw string) string {
	iss, err := unverifiedIssuer(raw)
	if err != nil {
		return ""
	}
	return iss
}

// Bearer returns the token of a request's Authorization: Bearer header.
var Bearer = bearer
