// Package slots bounds how many requests of one kind run at once, in all and per caller,
// refusing the rest at once (a 429 with Retry-After) rather than queueing them: a queued
// upload holds its body in memory all the same, and without the per-caller bound a few
// clients (slow ones above all) could hold every slot. The REST API and the console
// share one set for log reads, so neither is a way around the other's bound.
package slots

import (
	"fmt"
	"sync"

	"github.com/datajobs/datajobs/internal/job"
)

// RetryAfter is what a refused client is told to wait, in seconds.
const RetryAfter = 5

// Slots admits at most n requests at once, and perCaller of one caller.
type Slots struct {
	what       string // the requests, for the error body: "sources uploads"
	flag       string // the flag that sets n, for the error body
	callerFlag string // the flag that sets perCaller
	free       chan struct{}
	perCaller  int

	mu   sync.Mutex
	held map[string]int // slots held per caller
}

// New returns slots for what (plural, "sources uploads"), bounded by the flags named.
func New(what, flag string, n int, callerFlag string, perCaller int) *Slots {
	return &Slots{
		what: what, flag: flag, callerFlag: callerFlag, free: make(chan struct{}, n),
		perCaller: min(perCaller, n), held: map[string]int{},
	}
}

// Acquire takes a slot for caller, or returns the busy error (job.KindBusy: 429) that
// says which bound was hit. release gives the slot back.
func (s *Slots) Acquire(caller string) (release func(), err error) {
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

func (s *Slots) busy(why string) error {
	return &job.Error{
		Kind:            job.KindBusy,
		What:            fmt.Sprintf("Too many %s are in progress.", s.what),
		Why:             why,
		Consequences:    "The request was not processed and nothing was changed.",
		Countermeasures: fmt.Sprintf("Retry in %d seconds.", RetryAfter),
	}
}
