package controller

import (
	"context"
	"log/slog"
	"time"

	"github.com/datajobs/datajobs/internal/backoff"
)

// Listener is the database's LISTEN (implemented by *store.Store).
type Listener interface {
	Listen(ctx context.Context, channel string, ready func(), notify func(payload string)) error
}

// Listen LISTENs on channel until ctx ends, reconnecting after a failure with exponential
// backoff (from base to 30 s). connected runs each time the connection listens, first
// saying whether it is the first time; notify receives every payload.
func Listen(ctx context.Context, db Listener, channel string, base time.Duration, log *slog.Logger,
	connected func(first bool), notify func(payload string),
) {
	b, first := backoff.New(base, 30*time.Second), true
	for ctx.Err() == nil {
		err := db.Listen(ctx, channel, func() {
			b.Reset()
			connected(first)
			first = false
		}, notify)
		if ctx.Err() != nil {
			return
		}
		log.WarnContext(ctx, "listen_failed", "channel", channel, "error", err, "retry_in", b.Next())
		if !b.Wait(ctx) {
			return
		}
	}
}
