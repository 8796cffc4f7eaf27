package server

import (
	"net/http"
	"net/http/pprof"

	"github.com/datajobs/datajobs/internal/ui"
)

// route is one pattern a listener serves.
type route struct {
	pattern string
	h       http.Handler
}

// publicRoutes are the public listener's routes: the probes, the web console at ui.Prefix
// (nil when off; then / too leads to it) and the REST API (with the GraphQL query) for every other path. The
// authorization test walks every one of them (authz_test.go).
func publicRoutes(h *health, console, api http.Handler) []route {
	routes := []route{{"GET /healthz", http.HandlerFunc(h.publicLive)}, {"GET /readyz", http.HandlerFunc(h.publicReady)}, {"/", api}}
	if console != nil {
		// "/" is where a person types the address: it leads to the console.
		routes = append(routes, route{ui.Prefix, console}, route{"GET /{$}", http.RedirectHandler(ui.Prefix, http.StatusFound)})
	}
	return routes
}

// adminRoutes are the admin listener's: the probes, metrics and debugging, never on the
// public port; with profiling also Go's profiles (net/http/pprof), which the benchmarks
// read from a running leader.
func adminRoutes(h *health, metrics, syncPlan http.Handler, profiling bool) []route {
	routes := []route{
		{"GET /healthz", http.HandlerFunc(h.adminLive)},
		{"GET /readyz", http.HandlerFunc(h.adminReady)},
		{"GET /metrics", metrics},
		{"GET /data-jobs/debug/sync-plan", syncPlan},
	}
	if profiling {
		routes = append(routes,
			route{"GET /debug/pprof/", http.HandlerFunc(pprof.Index)}, // heap, goroutine, allocs, … by name
			route{"GET /debug/pprof/profile", http.HandlerFunc(pprof.Profile)},
			route{"GET /debug/pprof/trace", http.HandlerFunc(pprof.Trace)},
			route{"GET /debug/pprof/symbol", http.HandlerFunc(pprof.Symbol)})
	}
	return routes
}

func mux(routes []route) *http.ServeMux {
	m := http.NewServeMux()
	for _, r := range routes {
		m.Handle(r.pattern, r.h)
	}
	return m
}
