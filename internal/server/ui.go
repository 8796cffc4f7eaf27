package server

import (
	"cmp"
	"context"
	"net/http"
	"sort"

	"github.com/datajobs/datajobs/internal/auth"
	"github.com/datajobs/datajobs/internal/httpapi"
	"github.com/datajobs/datajobs/internal/replicaread"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/slots"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/synchronizer"
	"github.com/datajobs/datajobs/internal/ui"
)

// UIConfig configures the web console at /ui/ (docs/ui.md).
type UIConfig struct {
	// Disabled turns the console off (default false: served).
	Disabled bool
	// OIDCClientID is the console's OAuth2 client at the issuer; in auth mode oidc the
	// console is off without it.
	OIDCClientID string
	// OIDCClientSecret is empty for a public client (the flow uses PKCE either way).
	OIDCClientSecret string
	// OIDCIssuerURL is the issuer people sign in with (default: the first of
	// Auth.OIDC.IssuerURLs).
	OIDCIssuerURL string
	// OIDCScopes are asked for at sign-in (default "openid").
	OIDCScopes []string
	// PublicURL is the console's external base URL, for the sign-in redirect; required
	// with OIDCClientID (the redirect is never made from the request's Host).
	PublicURL string
	// SessionKey seals the login cookie (and the session cookie of auth mode none); the
	// same on every replica (default: random per process).
	SessionKey string
}

// consoleHandler builds the web console on the same service, store and authorization
// as the REST API; nil when it is off.
func consoleHandler(ctx context.Context, cfg Config, svc *service.Service, db *store.Store, logReads *slots.Slots, authn httpapi.Authenticator, authz httpapi.Authorizer, syncer *synchronizer.Synchronizer, secrets *service.Secrets, replicaReads *replicaread.Router) (http.Handler, error) {
	if cfg.UI.Disabled {
		return nil, nil
	}
	c := ui.Config{
		SessionKey: []byte(cfg.UI.SessionKey), PublicURL: cfg.UI.PublicURL, Logger: cfg.Logger,
		Plans: latestPlan(syncer), Sessions: db, LogReads: logReads, Secrets: secrets, ReplicaReads: replicaReads,
	}
	if authz != nil {
		c.Webhook = authz
	}
	if verifier, ok := authn.(*auth.OIDC); ok {
		if cfg.UI.OIDCClientID == "" {
			cfg.Logger.WarnContext(ctx, "ui_disabled", "detail", "the web console needs --ui-oidc-client-id in auth mode oidc")
			return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				http.Error(w, "The web console is not configured: the operators must set --ui-oidc-client-id.", http.StatusNotFound)
			}), nil
		}
		issuer := cfg.UI.OIDCIssuerURL
		if issuer == "" && len(cfg.Auth.OIDC.IssuerURLs) > 0 {
			issuer = cfg.Auth.OIDC.IssuerURLs[0]
		}
		login, err := auth.NewLogin(auth.LoginConfig{
			IssuerURL: issuer, ClientID: cfg.UI.OIDCClientID, ClientSecret: cfg.UI.OIDCClientSecret,
			Scopes: cfg.UI.OIDCScopes, Audience: cmp.Or(cfg.Auth.OIDC.Audience, auth.DefaultAudience),
		}, verifier)
		if err != nil {
			return nil, err
		}
		c.Login = login
	}
	return ui.New(c, svc)
}

// latestPlan reads the synchronizer's latest plan of one job; this replica has plans
// only while it leads (or runs dry).
func latestPlan(syncer *synchronizer.Synchronizer) ui.Plans {
	return func(name string) (ui.Plan, bool) {
		if syncer == nil {
			return ui.Plan{}, false
		}
		plans := syncer.LatestPlans() // sorted by job name
		i := sort.Search(len(plans), func(i int) bool { return plans[i].Job >= name })
		if i == len(plans) || plans[i].Job != name {
			return ui.Plan{}, false
		}
		return ui.Plan{Action: string(plans[i].Action), Reason: plans[i].Reason}, true
	}
}
