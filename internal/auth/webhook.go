package auth

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/datajobs/datajobs/internal/job"
)

// WebhookRequest is the body POSTed to the authorization webhook: the VDK Control
// Service's, so that an existing webhook keeps working.
type WebhookRequest struct {
	RequesterUserID          string `json:"requester_user_id"`
	RequestedResourceTeam    string `json:"requested_resource_team"`
	RequestedResourceName    string `json:"requested_resource_name"`
	RequestedResourceID      string `json:"requested_resource_id"`
	RequestedHTTPPath        string `json:"requested_http_path"`
	RequestedHTTPVerb        string `json:"requested_http_verb"`
	RequestedResourceNewTeam string `json:"requested_resource_new_team"`
	// RequestedPermission is "read" for GET and HEAD, "write" otherwise.
	RequestedPermission string `json:"requested_permission"`
}

// The defaults of WebhookConfig that the flags of `datajobs serve` use too.
const (
	DefaultWebhookTimeout  = 5 * time.Second
	DefaultWebhookCacheTTL = 10 * time.Second
)

// WebhookConfig configures the authorization webhook client.
type WebhookConfig struct {
	// URL receives a POST per authenticated request. Required.
	URL string
	// Timeout bounds one call; a call that takes longer denies with 503 (default 5s).
	Timeout time.Duration
	// CacheTTL is how long a decision (allow or deny, never an error) is reused for the
	// same request body (default 10s; negative: no cache).
	CacheTTL time.Duration
	// CacheSize bounds the number of cached decisions (default 10,000).
	CacheSize int
	// HTTPClient makes the calls (default: one with Timeout). Its redirect policy is
	// replaced: a redirect is never followed.
	HTTPClient *http.Client
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Webhook asks an external service whether an authenticated caller may make a request.
// It fails closed: an answer other than 2xx, 401 or 403 (a redirect included), a body that
// cannot be read whole, or none in time, denies with 503. Redirects are not followed: a
// webhook answering 302 to any page that answers 200 would otherwise allow everything.
type Webhook struct {
	cfg WebhookConfig

	mu    sync.Mutex
	cache map[WebhookRequest]decision
}

type decision struct {
	err     error // nil: allowed
	expires time.Time
}

// NewWebhook returns a client of the webhook at cfg.URL.
func NewWebhook(cfg WebhookConfig) (*Webhook, error) {
	if cfg.URL == "" {
		return nil, errors.New("authorization webhook: the url is required")
	}
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultWebhookTimeout)
	cfg.CacheTTL = cmp.Or(cfg.CacheTTL, DefaultWebhookCacheTTL)
	cfg.CacheSize = cmp.Or(cfg.CacheSize, 10_000)
	client := http.Client{Timeout: cfg.Timeout}
	if cfg.HTTPClient != nil {
		client = *cfg.HTTPClient
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	cfg.HTTPClient = &client
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Webhook{cfg: cfg, cache: map[WebhookRequest]decision{}}, nil
}

// Authorize returns nil when the webhook allows req; otherwise a domain error: Forbidden
// or Unauthenticated when the webhook answered 403 or 401, Unavailable (503) for any
// other answer, a timeout or a network error.
func (w *Webhook) Authorize(ctx context.Context, req WebhookRequest) error {
	now := w.cfg.Now()
	w.mu.Lock()
	d, ok := w.cache[req]
	w.mu.Unlock()
	if ok && now.Before(d.expires) {
		return d.err
	}
	err := w.call(ctx, req)
	if err != nil && job.KindOf(err) == job.KindUnavailable {
		return err // never cache a failure: the next request asks again
	}
	if w.cfg.CacheTTL > 0 {
		w.mu.Lock()
		if len(w.cache) >= w.cfg.CacheSize {
			clear(w.cache) // simple bound; decisions are cheap to ask again
		}
		w.cache[req] = decision{err: err, expires: now.Add(w.cfg.CacheTTL)}
		w.mu.Unlock()
	}
	return err
}

func (w *Webhook) call(ctx context.Context, req WebhookRequest) error {
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("authorization webhook: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, w.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return job.Unavailable("authorization webhook", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := w.cfg.HTTPClient.Do(hr)
	if err != nil {
		return job.Unavailable("authorization webhook", err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)); err != nil {
		// A cut or malformed answer is no decision, whatever its status line said.
		return job.Unavailable("authorization webhook", fmt.Errorf("status %d, body unreadable: %w", resp.StatusCode, err))
	}
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode == http.StatusUnauthorized:
		e := job.Unauthenticated("The authorization webhook did not accept the caller.")
		return e
	case resp.StatusCode == http.StatusForbidden:
		team := req.RequestedResourceTeam
		if req.RequestedResourceNewTeam != "" {
			team += " (or " + req.RequestedResourceNewTeam + ")"
		}
		return job.Forbidden(req.RequesterUserID, team, "The authorization webhook denied the request.")
	default: // 3xx (never followed), 5xx and anything else
		return job.Unavailable("authorization webhook", fmt.Errorf("status %d", resp.StatusCode))
	}
}
