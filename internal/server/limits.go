package server

import (
	"time"

	"github.com/datajobs/datajobs/internal/httpapi"
)

// RequestLimits bound what one request, or many at once, may cost the service (see
// docs/api.md, "Limits"). Zero fields take their defaults.
type RequestLimits struct {
	// Limits are the REST API's: its transfer slots, log reads and deadlines (see
	// httpapi.Limits for each field and its default).
	httpapi.Limits
	// MaxJobsPerTeam caps the data jobs of a team; one more is refused with 409 (default 0:
	// no limit).
	MaxJobsPerTeam int
	// MaxSourceBytesPerTeam caps the bytes of the sources archives stored for a team's
	// jobs; an upload over it is refused with 409 (default 0: no limit).
	MaxSourceBytesPerTeam int64
	// MaxActiveExecutionsPerTeam caps a team's manual executions (starts, re-runs,
	// backfill runs) submitted or running at once: a start past it answers 409, a
	// backfill waits (default store.DefaultMaxActiveExecutions; negative: no limit).
	MaxActiveExecutionsPerTeam int
	// GraphQLTimeout bounds each GraphQL query (default graphapi.DefaultTimeout, 10s);
	// past it the answer is 503.
	GraphQLTimeout time.Duration
	// DisableGraphQLIntrospection refuses __schema and __type queries (default: allowed).
	DisableGraphQLIntrospection bool
	// GraphQLMaxQueryBytes caps a GraphQL document; a longer one is refused before it is
	// parsed (default graphapi.DefaultMaxQueryBytes, 8 KiB).
	GraphQLMaxQueryBytes int
	// MaxConcurrentGraphQL caps the GraphQL queries in progress, parsing included; more
	// wait (AdmissionWait), then answer 429 with Retry-After (default
	// graphapi.DefaultMaxConcurrent, 8).
	MaxConcurrentGraphQL int
	// AdmissionWait is the longest a GraphQL query, sources upload or download or log
	// read waits for a slot when every one of its kind is in use, as many waiting as may
	// run; past it, or with the queue full, it answers 429 (default slots.DefaultWait, 2s;
	// negative: at once).
	AdmissionWait time.Duration
}
