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
