package auth_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/auth"
	"github.com/datajobs/datajobs/internal/job"
)

// webhookServer plays the operator's authorization webhook (an external service the
// operator writes): it answers status and counts the calls.
func webhookServer(t *testing.T, status func(auth.WebhookRequest) int, calls *atomic.Int32) string {
	t.Helper()
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		var req auth.WebhookRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		code := status(req)
		if code == 0 { // hang until the test ends: a timeout
			select {
			case <-block:
			case <-r.Context().Done():
			}
			return
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(func() { close(block); srv.Close() })
	return srv.URL
}

func TestWebhookDecides(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	url := webhookServer(t, func(r auth.WebhookRequest) int {
		switch r.RequestedResourceTeam {
		case "allowed":
			return http.StatusOK
		case "denied":
			return http.StatusForbidden
		case "unknown-user":
			return http.StatusUnauthorized
		case "broken":
			return http.StatusInternalServerError
		default:
			return 0
		}
	}, &calls)
	now := time.Now()
	wh, err := auth.NewWebhook(auth.WebhookConfig{URL: url, Timeout: 300 * time.Millisecond, CacheTTL: time.Minute, Now: func() time.Time { return now }})
	require.NoError(t, err)

	req := func(team string) auth.WebhookRequest {
		return auth.WebhookRequest{
			RequesterUserID: "alice", RequestedResourceTeam: team, RequestedResourceName: "job",
			RequestedHTTPPath: "/data-jobs/for-team/" + team + "/jobs/job", RequestedHTTPVerb: "GET", RequestedPermission: "read",
		}
	}
	tests := []struct {
		team string
		want job.Kind // 0: allowed
	}{
		{"allowed", 0},
		{"denied", job.KindForbidden},
		{"unknown-user", job.KindUnauthenticated},
		{"broken", job.KindUnavailable},
		{"hanging", job.KindUnavailable},
	}
	for _, tt := range tests {
		err := wh.Authorize(t.Context(), req(tt.team))
		require.Equal(t, tt.want, job.KindOf(err), "team %s: %v", tt.team, err)
	}
	require.Equal(t, int32(5), calls.Load())

	// Decisions are reused within the TTL; failures are not.
	require.NoError(t, wh.Authorize(t.Context(), req("allowed")))
	require.Equal(t, job.KindForbidden, job.KindOf(wh.Authorize(t.Context(), req("denied"))))
	require.Equal(t, job.KindUnavailable, job.KindOf(wh.Authorize(t.Context(), req("broken"))))
	require.Equal(t, int32(6), calls.Load(), "only the failure asked again")

	now = now.Add(2 * time.Minute)
	require.NoError(t, wh.Authorize(t.Context(), req("allowed")))
	require.Equal(t, int32(7), calls.Load(), "an expired decision is asked again")
}

// Attack (issue 22, item 4): the webhook client followed redirects, so a webhook (or
// whoever can make it answer) replying 302 to any page that answers 200 allowed every
// request. Each answer that is no decision must deny with 503: a redirect, a timeout, a
// 5xx, and a malformed or cut answer.
func TestWebhookFailsClosedOnAnythingButADecision(t *testing.T) {
	t.Parallel()
	allowPage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	t.Cleanup(allowPage.Close)
	hang := make(chan struct{})
	var servers []*httptest.Server
	t.Cleanup(func() { // the hanging handler returns first, then the servers close
		close(hang)
		for _, srv := range servers {
			srv.Close()
		}
	})
	answers := map[string]http.HandlerFunc{
		"a 302 to a page that answers 200": func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, allowPage.URL, http.StatusFound)
		},
		"a 307 to a page that answers 200": func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, allowPage.URL, http.StatusTemporaryRedirect)
		},
		"a 304": func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNotModified) },
		"a timeout": func(_ http.ResponseWriter, r *http.Request) {
			select {
			case <-hang:
			case <-r.Context().Done():
			}
		},
		"a 500":           func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) },
		"a 502":           func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadGateway) },
		"a 200 cut short": cutShort,
		"no HTTP at all":  notHTTP,
	}
	for name, answer := range answers {
		srv := httptest.NewServer(answer)
		servers = append(servers, srv)
		wh, err := auth.NewWebhook(auth.WebhookConfig{URL: srv.URL, Timeout: 300 * time.Millisecond, CacheTTL: time.Minute})
		require.NoError(t, err)
		for range 2 { // and not remembered as a decision
			err = wh.Authorize(t.Context(), auth.WebhookRequest{RequesterUserID: "mallory", RequestedResourceTeam: "team-a", RequestedHTTPVerb: "GET", RequestedPermission: "read"})
			require.Equal(t, job.KindUnavailable, job.KindOf(err), "%s: %v", name, err)
			require.Equal(t, http.StatusServiceUnavailable, job.KindOf(err).HTTPStatus(), name)
		}
	}

	// A client the operator passes in keeps its own settings but never follows a redirect.
	redirect := httptest.NewServer(answers["a 302 to a page that answers 200"])
	servers = append(servers, redirect)
	wh, err := auth.NewWebhook(auth.WebhookConfig{URL: redirect.URL, HTTPClient: &http.Client{Timeout: time.Second}})
	require.NoError(t, err)
	require.Equal(t, job.KindUnavailable, job.KindOf(wh.Authorize(t.Context(), auth.WebhookRequest{RequesterUserID: "mallory"})))
}

// cutShort answers 200 with a body shorter than its Content-Length.
func cutShort(w http.ResponseWriter, _ *http.Request) {
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"allowed\":")
	_ = buf.Flush()
}

// notHTTP answers bytes that are no HTTP response.
func notHTTP(w http.ResponseWriter, _ *http.Request) {
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	_, _ = buf.WriteString("SSH-2.0-OpenSSH_9.6\r\n\r\n")
	_ = buf.Flush()
}
