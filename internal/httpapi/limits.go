package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/datajobs/datajobs/internal/job"
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

// slots admits a bounded number of requests of one kind at once and refuses the others
// at once, with 429 and Retry-After, rather than queueing them: a queued upload holds its
// body in memory all the same.
type slots struct {
	what string // the requests, for the error body: "sources uploads"
	flag string // the flag that sets n, for the error body
	free chan struct{}
}

func newSlots(what, flag string, n int) *slots {
	return &slots{what: what, flag: flag, free: make(chan struct{}, n)}
}

// retryAfter is what a refused client is told to wait, in seconds.
const retryAfter = 5

// limit runs h when a slot is free and answers 429 otherwise.
func (a *api) limit(s *slots, h handler) handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		select {
		case s.free <- struct{}{}:
			defer func() { <-s.free }()
			return h(w, r)
		default:
			w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
			return &job.Error{
				Kind:            job.KindBusy,
				What:            fmt.Sprintf("Too many %s are in progress.", s.what),
				Why:             fmt.Sprintf("This server runs at most %d %s at once (%s).", cap(s.free), s.what, s.flag),
				Consequences:    "The request was not processed and nothing was changed.",
				Countermeasures: fmt.Sprintf("Retry in %d seconds.", retryAfter),
			}
		}
	}
}
