package httpapi

import (
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/datajobs/datajobs/internal/metric"
)

// Metrics counts the API's requests by route pattern (never the path: job names would
// make the series grow without bound), method and status, and times them.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge
}

// NewMetrics registers the HTTP metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := metric.On(reg)
	return &Metrics{
		requests: f.CounterVec("datajobs_http_requests_total", "API requests answered, by method, route pattern and status code.", "method", "route", "code"),
		duration: f.HistogramVec("datajobs_http_request_duration_seconds", "Time from receiving an API request to the end of its answer, by method and route pattern.", []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}, "method", "route"),
		inFlight: f.Gauge("datajobs_http_requests_in_flight", "API requests being served."),
	}
}

// observe records one answered request; pattern is the route's ("" when none matched).
func (m *Metrics) observe(method, pattern string, code int, took time.Duration) {
	if m == nil {
		return
	}
	route := "unmatched"
	if pattern != "" {
		// "GET /data-jobs/..." → "/data-jobs/...": the method has its own label.
		_, path, found := strings.Cut(pattern, " ")
		route = pattern
		if found {
			route = path
		}
	} else {
		method = "other" // a method no route takes could be anything the client sent
	}
	m.requests.WithLabelValues(method, route, strconv.Itoa(code)).Inc()
	m.duration.WithLabelValues(method, route).Observe(took.Seconds())
}

// started and finished track the requests in flight.
func (m *Metrics) started() {
	if m != nil {
		m.inFlight.Inc()
	}
}

func (m *Metrics) finished() {
	if m != nil {
		m.inFlight.Dec()
	}
}
