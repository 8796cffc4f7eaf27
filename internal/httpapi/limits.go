package httpapi

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/datajobs/datajobs/internal/auth"
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

// slots admits a bounded number of requests of one kind at once, and a smaller number
// per caller, and refuses the others at once, with 429 and Retry-After, rather than
// queueing them: a queued upload holds its body in memory all the same, and without the
// per-caller bound a few clients (slow ones above all) could hold every slot.
type slots struct {
	what       string // the requests, for the error body: "sources uploads"
	flag       string // the flag that sets the global bound, for the error body
	callerFlag string // the flag that sets the per-caller bound
	free       chan struct{}
	perCaller  int

	mu   sync.Mutex
	held map[string]int // slots held per caller
}

func newSlots(what, flag string, n int, callerFlag string, perCaller int) *slots {
	return &slots{
		what: what, flag: flag, callerFlag: callerFlag, free: make(chan struct{}, n),
		perCaller: min(perCaller, n), held: map[string]int{},
	}
}

// acquire takes a slot for caller, or says why it cannot.
func (s *slots) acquire(caller string) (release func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[caller] >= s.perCaller {
		return nil, s.busy(fmt.Sprintf("This server runs at most %d %s of one caller at once (%s).", s.perCaller, s.what, s.callerFlag))
	}
	select {
	case s.free <- struct{}{}:
	default:
		return nil, s.busy(fmt.Sprintf("This server runs at most %d %s at once (%s).", cap(s.free), s.what, s.flag))
	}
	s.held[caller]++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.held[caller]--; s.held[caller] == 0 {
			delete(s.held, caller)
		}
		<-s.free
	}, nil
}

func (s *slots) busy(why string) error {
	return &job.Error{
		Kind:            job.KindBusy,
		What:            fmt.Sprintf("Too many %s are in progress.", s.what),
		Why:             why,
		Consequences:    "The request was not processed and nothing was changed.",
		Countermeasures: fmt.Sprintf("Retry in %d seconds.", retryAfter),
	}
}

// retryAfter is what a refused client is told to wait, in seconds.
const retryAfter = 5

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
func (a *api) limit(s *slots, h handler) handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		release, err := s.acquire(callerKey(r))
		if err != nil {
			w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
			return err
		}
		defer release()
		return h(w, r)
	}
}
