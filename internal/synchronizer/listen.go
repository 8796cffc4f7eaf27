package synchronizer

import (
	"context"
	"log/slog"
	"time"

	"github.com/datajobs/datajobs/internal/backoff"
	"github.com/datajobs/datajobs/internal/store"
)

// listener is the database's LISTEN, as the synchronizer and the execution stage use it.
type listener interface {
	Listen(ctx context.Context, channel string, ready func(), notify func(payload string)) error
}

// listenLoop LISTENs on channel until ctx ends, reconnecting after a failure with
// exponential backoff (from base to 30 s). connected runs each time the connection
// listens, first saying whether it is the first time; notify receives every payload.
func listenLoop(ctx context.Context, db listener, channel string, base time.Duration, log *slog.Logger,
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

// listen enqueues every job named in a NOTIFY from the API, reconnecting after a drop
// with backoff. Each (re)connection triggers a full pass, for what it may have missed.
func (t *term) listen(ctx context.Context) {
	listenLoop(ctx, t.s.db, store.DesiredChannel, t.s.cfg.RetryBase, t.s.log, func(first bool) {
		if !first {
			t.s.log.InfoContext(ctx, "listen_reconnected")
		}
		// A change committed before LISTEN was in place sent a NOTIFY nobody heard:
		// a pass now covers it, the first time too (the term's first pass may have
		// read the database before this connection listened). The queue merges it
		// with a pass still waiting.
		t.queue.Add(resyncKey)
	}, func(name string) {
		t.notify(name)
		t.queue.Add(name)
	})
}
