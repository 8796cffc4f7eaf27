package httpapi

import (
	"cmp"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/datajobs/datajobs/internal/auth"
	"github.com/datajobs/datajobs/internal/slots"
)

// The defaults of Limits, which the flags of `datajobs serve` use too.
const (
	DefaultMaxConcurrentUploads   = 4
	DefaultMaxConcurrentDownloads = 16
	DefaultMaxUploadsPerCaller    = 2
	DefaultMaxDownloadsPerCaller  = 4
	DefaultMaxConcurrentLogReads  = 16
	DefaultMaxLogReadsPerCaller   = 4
	DefaultLogTailLines           = 1000
	DefaultMinTransferRate        = 16 << 10
	DefaultRequestTimeout         = time.Minute
	DefaultTransferTimeout        = 5 * time.Minute
)

// Limits bound what one request, or many at once, may cost the service (docs/api.md,
// "Limits"). Zero fields take their defaults.
type Limits struct {
	// MaxConcurrentUploads and MaxConcurrentDownloads cap the sources uploads and
	// downloads in progress; more wait for a slot as Config.Admission says, then get 429
	// with Retry-After (defaults 4 and 16: an upload holds its archive, up to twice, in
	// memory, a download a 1 MiB chunk).
	MaxConcurrentUploads   int
	MaxConcurrentDownloads int
	// MaxUploadsPerCaller and MaxDownloadsPerCaller cap what one caller (a verified
	// username, else a client address) holds of those (defaults 2 and 4), so a few
	// clients cannot hold every slot.
	MaxUploadsPerCaller   int
	MaxDownloadsPerCaller int
	// MaxConcurrentLogReads caps the execution log reads in progress, MaxLogReadsPerCaller
	// one caller's share (defaults 16 and 4): a live read streams the pod's log through
	// the apiserver from the kubelet.
	MaxConcurrentLogReads int
	MaxLogReadsPerCaller  int
	// LogTailLines is how many lines of a log the logs endpoint answers when the request
	// sets no tail_lines (default 1000); tail_lines <= 0 asks for all that is kept.
	LogTailLines int
	// MinTransferRate is the slowest a sources upload or download may go, in bytes per
	// second, after its first Config.MinTransferGrace (default 16 KiB/s; negative: no
	// minimum). Below it the connection is closed and its slot freed.
	MinTransferRate int64
	// RequestTimeout bounds reading a request and writing its answer (default 1m);
	// TransferTimeout does for sources uploads and downloads (default 5m).
	RequestTimeout  time.Duration
	TransferTimeout time.Duration
}

// deadlines bounds the time to read the request and write the answer from now on. The
// server's own ReadTimeout is sized for the largest upload; each route sets what it needs.
func deadlines(w http.ResponseWriter, d time.Duration) {
	rc := http.NewResponseController(w)
	at := time.Now().Add(d)
	// Errors mean the writer cannot set deadlines (a test recorder): nothing to bound.
	_ = rc.SetReadDeadline(at)
	_ = rc.SetWriteDeadline(at)
}

// NewLogReadSlots returns the slots of execution log reads, with the defaults of
// Limits.MaxConcurrentLogReads and MaxLogReadsPerCaller, waiting as q says; the server
// shares them with the console, which reads the same logs.
func NewLogReadSlots(n, perCaller int, q slots.Queue) *slots.Slots {
	return slots.New(slots.Config{
		Kind: "log_reads", What: "execution log reads", Flag: "--max-concurrent-log-reads", Limit: cmp.Or(max(n, 0), DefaultMaxConcurrentLogReads),
		CallerFlag: "--max-concurrent-log-reads-per-caller", PerCaller: cmp.Or(max(perCaller, 0), DefaultMaxLogReadsPerCaller),
	}, q)
}

// callerKey is who holds a slot: the verified username, else (auth mode none, where the
// name is the client's word) the client's address.
func callerKey(r *http.Request) string {
	if id, ok := auth.FromContext(r.Context()); ok && id.Verified {
		return "user:" + id.Username
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "addr:" + host
}

// limit runs h once a slot is free for the caller, and answers 429 when none came (the
// queue was full or the wait over).
func (a *api) limit(s *slots.Slots, h handler) handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		release, err := s.Acquire(r.Context(), callerKey(r))
		if err != nil {
			w.Header().Set("Retry-After", strconv.Itoa(s.RetryAfter()))
			return err
		}
		defer release()
		return h(w, r)
	}
}
