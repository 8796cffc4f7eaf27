// Package webhook delivers one notification to one HTTP endpoint: a JSON body signed as
// Standard Webhooks specify (https://www.standardwebhooks.com), or a Slack incoming-webhook
// body. It is bounded in every way a receiver could hold the sender: one timeout per request,
// a bounded read of the answer, no redirect followed, and no connection to a loopback,
// link-local or private address unless the installation allows it. It does not retry: it
// says whether a failure is permanent and how long the receiver asked to wait, and the
// dispatcher that owns the event decides.
package webhook

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// The formats of an Endpoint.
const (
	// FormatStandard is a Standard Webhooks body: {"type","timestamp","data"}.
	FormatStandard = "standard"
	// FormatSlack is a Slack incoming-webhook body: {"text","blocks"}.
	FormatSlack = "slack"
)

// Endpoint is where a message goes and how.
type Endpoint struct {
	// URL is an http or https address.
	URL string
	// Secret is the raw HMAC-SHA256 key (the bytes a "whsec_" string encodes). Required for
	// FormatStandard; a slack endpoint is signed too when it has one.
	Secret []byte
	// Format is FormatStandard (also when empty) or FormatSlack.
	Format string
}

// Message is one event, the same for every endpoint it goes to.
type Message struct {
	// ID is the event's idempotency key, sent as webhook-id: the same on every attempt, so
	// a receiver that saw it already can drop a repeat.
	ID string
	// Type names the event, e.g. "execution.failed".
	Type string
	// Timestamp is when the event happened (the body's "timestamp"; webhook-timestamp is
	// the time of the attempt, as the specification asks).
	Timestamp time.Time
	// Payload is the event's data, the body's "data" in the standard format.
	Payload json.RawMessage
	// Text is the message for people, the body of the slack format.
	Text string
}

// Config holds a Sender's bounds. Zero values take the defaults.
type Config struct {
	// Timeout bounds one request, from the dial to the last byte of the answer read
	// (default 10s).
	Timeout time.Duration
	// MaxResponseBytes bounds how much of an answer is read (default 64 KiB); the rest is
	// dropped with the connection.
	MaxResponseBytes int64
	// MaxRetryAfter caps the wait a receiver can ask for with Retry-After (default 1h).
	MaxRetryAfter time.Duration
	// AllowPrivate lets requests reach loopback, link-local and private addresses
	// (--notification-webhook-allow-private; tests and `datajobs dev` set it). Off, such an
	// address is refused when the connection is dialled, after name resolution, so a name
	// that resolves to one (DNS rebinding included) is refused too.
	AllowPrivate bool
	// UserAgent is sent with every request (default "datajobs-webhook/1").
	UserAgent string
	// Now is the clock of webhook-timestamp (default time.Now).
	Now func() time.Time
}

// Sender posts messages to endpoints. It is safe for concurrent use.
type Sender struct {
	cfg    Config
	client *http.Client
}

// NewSender returns a Sender with the bounds of cfg.
func NewSender(cfg Config) *Sender {
	cfg.Timeout = cmp.Or(cfg.Timeout, 10*time.Second)
	cfg.MaxResponseBytes = cmp.Or(cfg.MaxResponseBytes, 64<<10)
	cfg.MaxRetryAfter = cmp.Or(cfg.MaxRetryAfter, time.Hour)
	cfg.UserAgent = cmp.Or(cfg.UserAgent, "datajobs-webhook/1")
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	dialer := &net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}
	if !cfg.AllowPrivate {
		dialer.Control = refusePrivate
	}
	transport := &http.Transport{
		// No proxy from the environment: the dial-time check would see the proxy's
		// address, not the receiver's.
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   cfg.Timeout,
		ResponseHeaderTimeout: cfg.Timeout,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
	}
	client := &http.Client{
		Transport: transport,
		// A redirect is answered, not followed: a receiver must not steer signed events
		// to another address (and past the address check of the first).
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return &Sender{cfg: cfg, client: client}
}

// Close drops the Sender's idle connections.
func (s *Sender) Close() { s.client.CloseIdleConnections() }

// Send posts m to e once. A nil error means the receiver answered 2xx. Otherwise the error
// is an *Error: IsPermanent says whether trying again can help, RetryAfter how long the
// receiver asked to wait. Errors name the endpoint's host, never its whole URL (a Slack
// URL is itself a credential).
func (s *Sender) Send(ctx context.Context, e Endpoint, m Message) error {
	u, err := ParseURL(e.URL, s.cfg.AllowPrivate)
	if err != nil {
		return &Error{Permanent: true, msg: err.Error()}
	}
	body, err := encode(e, m)
	if err != nil {
		return &Error{Host: u.Host, Permanent: true, msg: err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return &Error{Host: u.Host, Permanent: true, msg: "build the request", err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", s.cfg.UserAgent)
	if len(e.Secret) > 0 {
		ts := s.cfg.Now().Unix()
		req.Header.Set("webhook-id", m.ID)
		req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
		req.Header.Set("webhook-signature", Sign(e.Secret, m.ID, ts, body))
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return transportError(u.Host, err)
	}
	defer resp.Body.Close()
	// A failure to read the rest of the answer changes nothing: the status says whether
	// the receiver has the event.
	snippet := readBounded(resp.Body, s.cfg.MaxResponseBytes)
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	return s.statusError(u.Host, resp, snippet)
}

// ParseURL checks that raw is an address a webhook may have: absolute http or https with a
// host, and, unless allowPrivate, not a literal loopback, link-local or private IP nor
// "localhost". Names are checked again when dialled; this refuses the obvious early, when
// a person enters the URL.
func ParseURL(raw string, allowPrivate bool) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("the webhook url cannot be parsed")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, errors.New("the webhook url must start with http:// or https://")
	}
	if u.Hostname() == "" {
		return nil, errors.New("the webhook url has no host")
	}
	if !allowPrivate && isPrivateHost(u.Hostname()) {
		return nil, fmt.Errorf("the webhook url's host %s is a loopback, link-local or private address", u.Hostname())
	}
	return u, nil
}

// answerBytes bounds what of a receiver's answer an error quotes.
const answerBytes = 80

// readBounded reads at most limit bytes of r and returns the start of it as a snippet for
// an error message (answerText).
func readBounded(r io.Reader, limit int64) string {
	b, _ := io.ReadAll(io.LimitReader(r, limit))
	return answerText(b)
}

// answerText is what of a receiver's answer an error quotes: the team reads it in its
// deliveries, so the receiver's words are kept short and plain (issue 41, L4). A URL may
// point at a service that answers with what it holds (an SSRF read, or an installation
// that allows private receivers); and an answer's control characters or invalid
// UTF-8 have no place in a stored error. So: valid UTF-8, each run of whitespace or
// unprintable characters one space, at most answerBytes, cut at a character.
func answerText(b []byte) string {
	var out strings.Builder
	space := false
	for _, r := range strings.ToValidUTF8(string(b[:min(len(b), 4*answerBytes)]), "\uFFFD") {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			space = true
			continue
		}
		word := string(r)
		if space && out.Len() > 0 {
			word = " " + word
		}
		if out.Len()+len(word) > answerBytes {
			break
		}
		space = false
		out.WriteString(word)
	}
	return out.String()
}
