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
// Config.MaxConcurrentLogReads and MaxLogReadsPerCaller, waiting as q says; the server
// shares them with the console, which reads the same logs.
func NewLogReadSlots(n, perCaller int, q slots.Queue) *slots.Slots {
	return slots.New(slots.Config{
		Kind: "log_reads", What: "execution log reads", Flag: "--max-concurrent-log-reads", Limit: cmp.Or(max(n, 0), 16),
		CallerFlag: "--max-concurrent-log-reads-per-caller", PerCaller: cmp.Or(max(perCaller, 0), 4),
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
