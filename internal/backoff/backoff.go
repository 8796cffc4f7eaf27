// Package backoff is the one exponential backoff of the service's loops that retry until
// they succeed or the process stops: the migrations at start, the restart of the leader's
// stages, the LISTEN reconnects. (Keyed retries of reconciles back off in their
// client-go work queue instead.)
package backoff

import (
	"context"
	"time"
)

// Backoff is a delay that doubles after each wait, from Base up to Max. The zero value is
// not usable: make one with New. It is not safe for concurrent use.
type Backoff struct {
	base, max, next time.Duration
}

// New returns a Backoff whose first wait lasts base, and no wait more than max.
func New(base, max time.Duration) *Backoff {
	return &Backoff{base: base, max: max, next: base}
}

// Next is how long the next Wait sleeps (to log with a failure).
func (b *Backoff) Next() time.Duration { return b.next }

// Wait sleeps for Next, then doubles it (at most Max). It returns false, at once, when ctx
// ends first.
func (b *Backoff) Wait(ctx context.Context) bool {
	timer := time.NewTimer(b.next)
	defer timer.Stop()
	b.next = min(2*b.next, b.max)
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// Reset starts again from Base: the operation succeeded for a while.
func (b *Backoff) Reset() { b.next = b.base }

// Delay is the wait before retry attempt (1 for the first retry) of something retried on
// a schedule kept elsewhere (a row's next attempt time): base doubled per attempt, at
// most max.
func Delay(base, max time.Duration, attempt int) time.Duration {
	d := base
	for i := 1; i < attempt && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}
