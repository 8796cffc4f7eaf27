package synchronizer

import (
	"context"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/store"
)

// listen enqueues every job named in a NOTIFY from the API, reconnecting after a drop
// with backoff. Each (re)connection triggers a full pass, for what it may have missed.
func (t *term) listen(ctx context.Context) {
	controller.Listen(ctx, t.s.db, store.DesiredChannel, t.s.cfg.RetryBase, t.s.log, func(first bool) {
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
