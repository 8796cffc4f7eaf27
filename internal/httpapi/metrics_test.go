package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/httpapi"
)

func TestRequestsAreCountedByRoutePatternAndStatus(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	e := newEnv(t, withAPI(httpapi.Config{Metrics: httpapi.NewMetrics(reg)}))
	e.createJob("team-a", "my-job")
	require.Equal(t, http.StatusNotFound, e.do("GET", "/data-jobs/for-team/team-a/jobs/other-job", "").status)
	require.Equal(t, http.StatusNotFound, e.do("GET", "/data-jobs/for-team/team-b/jobs/my-job", "").status)
	require.Equal(t, http.StatusNotFound, e.do("GET", "/no/such/path", "").status)

	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, line := range []string{
		`datajobs_http_requests_total{code="201",method="POST",route="/data-jobs/for-team/{team}/jobs"} 1`,
		`datajobs_http_requests_total{code="404",method="GET",route="/data-jobs/for-team/{team}/jobs/{job}"} 2`,
		`datajobs_http_requests_total{code="404",method="other",route="unmatched"} 1`,
		`datajobs_http_request_duration_seconds_count{method="GET",route="/data-jobs/for-team/{team}/jobs/{job}"} 2`,
		`datajobs_http_requests_in_flight 0`,
	} {
		require.Contains(t, body, line)
	}
	require.NotContains(t, body, "my-job", "no path, no job name, in a label")
}
