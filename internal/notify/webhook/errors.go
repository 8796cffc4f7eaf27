package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Error is a failed delivery.
type Error struct {
	// Host is the endpoint's host (never the whole URL).
	Host string
	// Status is the receiver's HTTP status, 0 when none came.
	Status int
	// Permanent: the same request will fail again (a 4xx other than 408 and 429, a
	// redirect, an address refused, an endpoint that cannot be sent to).
	Permanent bool
	// RetryAfter is the wait the receiver asked for (Retry-After), capped; 0 if none.
	RetryAfter time.Duration

	msg string
	err error
}

func (e *Error) Error() string {
	s := "webhook"
	if e.Host != "" {
		s += " " + e.Host
	}
	s += ": " + e.msg
	if e.err != nil {
		s += ": " + e.err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.err }

// IsPermanent reports whether err is a failure that trying again cannot mend.
func IsPermanent(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Permanent
}

// RetryAfter returns the wait the receiver asked for before the next attempt, 0 if it
// asked for none.
func RetryAfter(err error) time.Duration {
	var e *Error
	if errors.As(err, &e) {
		return e.RetryAfter
	}
	return 0
}

// errRefusedAddress is what the dial-time check returns for a private address.
var errRefusedAddress = errors.New("refused address")

// transportError classifies a failure with no answer: a refused address is permanent,
// everything else (timeouts, resets, names that do not resolve) may pass.
func transportError(host string, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // its text holds the whole URL
	}
	switch {
	case errors.Is(err, errRefusedAddress):
		return &Error{Host: host, Permanent: true, msg: "the host resolves to a loopback, link-local or private address", err: err}
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Host: host, msg: "no answer in time", err: err}
	default:
		return &Error{Host: host, msg: "request failed", err: err}
	}
}

// statusError classifies a non-2xx answer.
func (s *Sender) statusError(host string, resp *http.Response, snippet string) error {
	e := &Error{Host: host, Status: resp.StatusCode}
	switch code := resp.StatusCode; {
	case code >= 300 && code < 400:
		e.Permanent = true
		e.msg = fmt.Sprintf("answered %d (redirects are not followed: set the final url)", code)
		return e
	case code == http.StatusRequestTimeout, code == http.StatusTooManyRequests:
	case code >= 400 && code < 500:
		e.Permanent = true
	}
	e.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), s.cfg.Now(), s.cfg.MaxRetryAfter)
	e.msg = fmt.Sprintf("answered %d", resp.StatusCode)
	if snippet != "" {
		e.msg += " " + strconv.Quote(snippet)
	}
	return e
}

// parseRetryAfter reads Retry-After as seconds or an HTTP date, capped at limit.
func parseRetryAfter(v string, now time.Time, limit time.Duration) time.Duration {
	if v == "" {
		return 0
	}
	var d time.Duration
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		d = time.Duration(min(n, int64(limit/time.Second)+1)) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), limit)
}
