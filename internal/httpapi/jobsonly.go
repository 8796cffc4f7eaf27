package httpapi

import (
	"net/http"
	"slices"
)

// JobsOnlyHeader marks a request that came through a door kept for running data jobs
// (JobsOnly): the API then accepts only a job's own token, never the admin of auth mode
// none. Whoever sends it only restricts themselves.
const JobsOnlyHeader = "X-Datajobs-Jobs-Only"

// JobsOnly is the door of running data jobs to the API when they reach it at an address
// of their own (`datajobs dev`'s forward on the real node's bridge, issue 41 M4): it lets
// through only the routes a job's token may use (its properties and secrets; with
// Config.JobTokenTeamExecutions its team's executions, which the API decides), marked with
// JobsOnlyHeader, to next; any other path is 404, so nothing else of the service (the rest
// of the API, the console, GraphQL) is served there.
func JobsOnly(next http.Handler) http.Handler {
	mux := http.NewServeMux()
	marked := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set(JobsOnlyHeader, "true")
		next.ServeHTTP(w, r)
	})
	for _, pattern := range JobPatterns() {
		mux.Handle(pattern, marked)
	}
	return mux
}

// JobPatterns returns the patterns JobsOnly lets through, sorted: those whose rule may let
// a job's token through (memberOfTeamOrTheJob, memberOfTeamOrATeamJob).
func JobPatterns() []string {
	var out []string
	for pattern, rt := range (&api{}).routes().routes {
		if rt.rule.theJob || rt.rule.teamJobs {
			out = append(out, pattern)
		}
	}
	slices.Sort(out)
	return out
}
