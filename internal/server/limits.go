package server

import "time"

// RequestLimits bound what one request, or many at once, may cost the service (see
// docs/api.md, "Limits"). Zero fields take their defaults.
type RequestLimits struct {
	// MaxConcurrentUploads caps the sources uploads in progress; more answer 429 with
	// Retry-After (default 4: an upload holds its archive, up to twice, in memory).
	MaxConcurrentUploads int
	// MaxConcurrentDownloads caps the sources downloads in progress (default 16: a
	// download holds a 1 MiB chunk).
	MaxConcurrentDownloads int
	// MaxUploadsPerCaller and MaxDownloadsPerCaller cap one caller's share of those
	// (defaults 2 and 4).
	MaxUploadsPerCaller   int
	MaxDownloadsPerCaller int
	// MaxConcurrentLogReads caps the execution log reads in progress (default 16),
	// MaxLogReadsPerCaller one caller's share (default 4).
	MaxConcurrentLogReads int
	MaxLogReadsPerCaller  int
	// LogTailLines is the tail of a log answered without tail_lines (default 1000).
	LogTailLines int
	// MinTransferRate is the slowest a sources transfer may go after its first 10 s, in
	// bytes per second (default 16 KiB/s; negative: no minimum).
	MinTransferRate int64
	// RequestTimeout bounds reading a request and writing its answer (default 1m).
	RequestTimeout time.Duration
	// TransferTimeout bounds reading a sources upload or writing a download (default 5m).
	TransferTimeout time.Duration
	// MaxJobsPerTeam caps the data jobs of a team; one more is refused with 409 (default 0:
	// no limit).
	MaxJobsPerTeam int
	// MaxSourceBytesPerTeam caps the bytes of the sources archives stored for a team's
	// jobs; an upload over it is refused with 409 (default 0: no limit).
	MaxSourceBytesPerTeam int64
	// GraphQLTimeout bounds each GraphQL query (default 10s); past it the answer is 503.
	GraphQLTimeout time.Duration
	// DisableGraphQLIntrospection refuses __schema and __type queries (default: allowed).
	DisableGraphQLIntrospection bool
	// GraphQLMaxQueryBytes caps a GraphQL document; a longer one is refused before it is
	// parsed (default 8 KiB).
	GraphQLMaxQueryBytes int
	// MaxConcurrentGraphQL caps the GraphQL queries in progress, parsing included; more
	// wait (AdmissionWait), then answer 429 with Retry-After (default 8).
	MaxConcurrentGraphQL int
	// AdmissionWait is the longest a GraphQL query, sources upload or download or log
	// read waits for a slot when every one of its kind is in use, as many waiting as may
	// run; past it, or with the queue full, it answers 429 (default 2s; negative: at once).
	AdmissionWait time.Duration
}
