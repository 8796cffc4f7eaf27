package server

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/datajobs/datajobs/internal/auth"
	"github.com/datajobs/datajobs/internal/httpapi"
)

// AuthMode says how API callers are authenticated.
type AuthMode string

// The authentication modes.
const (
	// AuthOIDC requires a bearer JWT of a trusted OIDC issuer on every /data-jobs/ request.
	AuthOIDC AuthMode = "oidc"
	// AuthNone trusts every caller as an admin: for `datajobs dev` on 127.0.0.1 only.
	AuthNone AuthMode = "none"
)

// AuthConfig is who may call the API and what they may do.
type AuthConfig struct {
	// Mode is oidc or none (default oidc).
	Mode AuthMode
	// OIDC configures token verification in mode oidc: issuers (required), audience
	// (default "datajobs"), username claim (default "sub"), teams claim (default
	// "groups") and admin teams.
	OIDC auth.OIDCConfig
	// WebhookURL, when set, is asked about every authenticated request (fail closed).
	WebhookURL string
	// WebhookTimeout bounds one webhook call (default 5s).
	WebhookTimeout time.Duration
	// WebhookCacheTTL is how long a webhook decision is reused (default 10s).
	WebhookCacheTTL time.Duration
	// JobTokenTeamExecutions lets a running job's token start, list and read the
	// executions of its own team's jobs, what VDK's vdk-dag plugin sends (default off:
	// a job's token reaches only its own job; docs/compatibility.md).
	JobTokenTeamExecutions bool
}

// buildAuth returns the API's authenticator and authorizer for cfg; nil ones mean auth
// mode none and no webhook. Mode none is logged as a warning.
func buildAuth(ctx context.Context, cfg Config) (httpapi.Authenticator, httpapi.Authorizer, error) {
	var authn httpapi.Authenticator
	switch cfg.Auth.Mode {
	case AuthOIDC:
		if cfg.Auth.OIDC.Logger == nil {
			cfg.Auth.OIDC.Logger = cfg.Logger
		}
		o, err := auth.NewOIDC(cfg.Auth.OIDC)
		if err != nil {
			return nil, nil, err
		}
		authn = o
	case AuthNone:
		if !loopback(cfg.Listen) {
			return nil, nil, fmt.Errorf("auth mode none trusts every caller as an admin of every team, so it is refused on --listen %q, which is not a loopback address: listen on 127.0.0.1 or [::1], or use --auth-mode oidc", cfg.Listen)
		}
		cfg.Logger.WarnContext(ctx, "auth_mode_none",
			"detail", "every caller is trusted as an admin of every team; use only on a trusted loopback address")
	default:
		return nil, nil, fmt.Errorf("auth mode %q: must be oidc or none", cfg.Auth.Mode)
	}
	if cfg.Auth.WebhookURL == "" {
		return authn, nil, nil
	}
	wh, err := auth.NewWebhook(auth.WebhookConfig{URL: cfg.Auth.WebhookURL, Timeout: cfg.Auth.WebhookTimeout, CacheTTL: cfg.Auth.WebhookCacheTTL})
	if err != nil {
		return nil, nil, err
	}
	return authn, wh, nil
}

// loopback reports whether the listen address host:port accepts connections only from
// this machine: an IP of the loopback range or "localhost". An empty host (":8092")
// listens on every interface.
func loopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
