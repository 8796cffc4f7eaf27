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
// Config.MaxConcurrentLogReads and MaxLogReadsPerCaller; the server shares them with the
// console, which reads the same logs.
func NewLogReadSlots(n, perCaller int) *slots.Slots {
	return slots.New("execution log reads", "--max-concurrent-log-reads", cmp.Or(max(n, 0), 16),
		"--max-concurrent-log-reads-per-caller", cmp.Or(max(perCaller, 0), 4))
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

// limit runs h when a slot is free for the caller and answers 429 otherwise.
func (a *api) limit(s *slots.Slots, h handler) handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		release, err := s.Acquire(callerKey(r))
		if err != nil {
			w.Header().Set("Retry-After", strconv.Itoa(slots.RetryAfter))
			return err
		}
		defer release()
		return h(w, r)
	}
}
