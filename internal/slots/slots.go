// Package slots admits the requests of one kind (GraphQL queries, sources uploads and
// downloads, execution log reads): at most a limit of them run at once, and a share of
// it of one caller's. Past either bound a request waits for a slot, first come first
// served, in a queue as long as the limit, and for at most the queue's wait (default 2 s);
// when the queue is full or the wait is over it is refused (429 with Retry-After). A burst
// of twice the limit of short requests (a console or a script sending 16 queries of
// 100 ms at once) then waits some milliseconds instead of failing, while a sustained
// overload is still refused quickly: the queue never holds more than the limit's worth of
// requests (each holds its connection and its handler's goroutine, no body read yet), so
// it costs bounded memory and goroutines. Without the per-caller share a few clients
// (slow ones above all) could hold every slot. The REST API and the console share one set
// for log reads, so neither is a way around the other's bound.
package slots

import (
	"cmp"
	"container/list"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/datajobs/datajobs/internal/job"
)

// DefaultWait is how long a request waits for a slot unless Queue.Wait says otherwise.
const DefaultWait = 2 * time.Second

// Config names one kind of request and its bounds.
type Config struct {
	// Kind is the kind's label on the metrics ("graphql", "uploads", ...).
	Kind string
	// What names the requests, plural, for the error body ("sources uploads").
	What string
	// Flag is the flag that sets Limit, for the error body.
	Flag string
	// Limit is how many run at once; as many may wait.
	Limit int
	// PerCaller is how many of one caller's run at once, and may wait (default, and at
	// most, Limit); CallerFlag the flag that sets it.
	PerCaller  int
	CallerFlag string
	// RetryAfter is what a refused client is told to wait, in seconds (default 5).
	RetryAfter int
}

// Queue says how requests wait for a slot: the same for every kind.
type Queue struct {
	// Wait is the longest a request waits for a slot (default DefaultWait; negative:
	// refuse at once); WaitFlag the flag that sets it, for the error body.
	Wait     time.Duration
	WaitFlag string
	// Metrics, when set, counts the waits and the refusals (see NewMetrics).
	Metrics *Metrics
}

// Slots admits the requests of one kind.
type Slots struct {
	cfg   Config
	queue Queue

	mu      sync.Mutex
	inUse   int
	held    map[string]int // slots held per caller
	waiting map[string]int // requests waiting per caller
	waiters list.List      // of *waiter, oldest first
}

// waiter is one request waiting for a slot.
type waiter struct {
	caller string
	// ready is closed when a release has handed it a slot (granted, under mu).
	ready   chan struct{}
	granted bool
}

// New returns the slots of the kind cfg describes, waiting as q says.
func New(cfg Config, q Queue) *Slots {
	cfg.Limit = max(cfg.Limit, 1)
	cfg.PerCaller = min(cmp.Or(max(cfg.PerCaller, 0), cfg.Limit), cfg.Limit)
	cfg.RetryAfter = cmp.Or(max(cfg.RetryAfter, 0), 5)
	q.Wait = cmp.Or(q.Wait, DefaultWait)
	return &Slots{cfg: cfg, queue: q, held: map[string]int{}, waiting: map[string]int{}}
}

// RetryAfter is what a refused client is told to wait, in seconds.
func (s *Slots) RetryAfter() int { return s.cfg.RetryAfter }

// Acquire takes a slot for caller, waiting for one if none is free, or returns the busy
// error (job.KindBusy: 429) that says which bound was hit. release gives the slot back.
// ctx ending while it waits refuses it too (its client is gone).
func (s *Slots) Acquire(ctx context.Context, caller string) (release func(), err error) {
	s.mu.Lock()
	if s.free(caller) {
		s.take(caller)
		s.mu.Unlock()
		return s.releaser(caller), nil
	}
	why := s.bound(caller)
	if s.queue.Wait < 0 || s.waiters.Len() >= s.cfg.Limit || s.waiting[caller] >= s.cfg.PerCaller {
		s.mu.Unlock()
		s.queue.Metrics.refused(s.cfg.Kind, reasonQueueFull)
		return nil, s.busy(why, s.queueFull())
	}
	w := &waiter{caller: caller, ready: make(chan struct{})}
	el := s.waiters.PushBack(w)
	s.waiting[caller]++
	s.queue.Metrics.waiting(s.cfg.Kind, 1)
	s.mu.Unlock()

	start := time.Now()
	timer := time.NewTimer(s.queue.Wait)
	defer timer.Stop()
	reason := reasonWaitOver
	select {
	case <-w.ready:
	case <-timer.C:
	case <-ctx.Done():
		reason = reasonGone
	}
	s.mu.Lock()
	if !w.granted {
		s.waiters.Remove(el)
		s.unwait(caller)
	}
	s.mu.Unlock()
	s.queue.Metrics.waited(s.cfg.Kind, time.Since(start), w.granted)
	if w.granted { // perhaps just as the wait ended: the slot is the request's all the same
		return s.releaser(caller), nil
	}
	s.queue.Metrics.refused(s.cfg.Kind, reason)
	return nil, s.busy(why, fmt.Sprintf("It waited %s for one to end%s.", s.queue.Wait, s.flagNote(s.queue.WaitFlag)))
}

// free reports whether caller may take a slot now (under mu). A request that finds one
// free never overtakes a waiting one: release hands every freed slot to the oldest waiter
// it may go to, so no waiter is ever one a slot could go to.
func (s *Slots) free(caller string) bool {
	return s.inUse < s.cfg.Limit && s.held[caller] < s.cfg.PerCaller
}

func (s *Slots) take(caller string) {
	s.inUse++
	s.held[caller]++
}

// unwait counts a waiter of caller out (under mu).
func (s *Slots) unwait(caller string) {
	if s.waiting[caller]--; s.waiting[caller] == 0 {
		delete(s.waiting, caller)
	}
	s.queue.Metrics.waiting(s.cfg.Kind, -1)
}

// releaser gives caller's slot back once, to the oldest waiter it may go to.
func (s *Slots) releaser(caller string) func() {
	return sync.OnceFunc(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.inUse--
		if s.held[caller]--; s.held[caller] == 0 {
			delete(s.held, caller)
		}
		for el := s.waiters.Front(); el != nil; el = el.Next() {
			w := el.Value.(*waiter)
			if s.free(w.caller) {
				s.waiters.Remove(el)
				s.unwait(w.caller)
				s.take(w.caller)
				w.granted = true
				close(w.ready)
				return
			}
		}
	})
}

// bound says which bound keeps caller out now (under mu).
func (s *Slots) bound(caller string) string {
	if s.held[caller] >= s.cfg.PerCaller && s.cfg.PerCaller < s.cfg.Limit {
		return fmt.Sprintf("This server runs at most %d %s of one caller at once%s.", s.cfg.PerCaller, s.cfg.What, s.flagNote(s.cfg.CallerFlag))
	}
	return fmt.Sprintf("This server runs at most %d %s at once%s.", s.cfg.Limit, s.cfg.What, s.flagNote(s.cfg.Flag))
}

func (s *Slots) queueFull() string {
	if s.queue.Wait < 0 {
		return "No request waits for a slot" + s.flagNote(s.queue.WaitFlag) + "."
	}
	return fmt.Sprintf("As many as may wait for one (%d, %d of one caller) already did.", s.cfg.Limit, s.cfg.PerCaller)
}

func (s *Slots) flagNote(flag string) string {
	if flag == "" {
		return ""
	}
	return " (" + flag + ")"
}

func (s *Slots) busy(bound, queue string) error {
	return job.NewError(job.KindBusy,
		fmt.Sprintf("Too many %s are in progress.", s.cfg.What),
		bound+" "+queue,
		"The request was not processed and nothing was changed.",
		fmt.Sprintf("Retry in %d seconds.", s.cfg.RetryAfter),
	)
}
