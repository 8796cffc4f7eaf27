package synchronizer

import (
	"context"
	"log/slog"
	"time"

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

// listenLoop is controller.Listen, as teamsecret.go calls it.
func listenLoop(ctx context.Context, db controller.Listener, channel string, base time.Duration, log *slog.Logger,
	connected func(first bool), notify func(payload string),
) {
	controller.Listen(ctx, db, channel, base, log, connected, notify)
}

// loop is what the CronJob controller's result asks of the shared loop.
func (r result) loop() controller.Result {
	return controller.Result{RequeueAfter: r.requeueAfter, Retry: r.retry, Terminal: r.terminal, HandedOver: r.handedOver}
}

// reconcileKey is the term's reconcile as the shared loop calls it.
func (t *term) reconcileKey(ctx context.Context, key string) (controller.Result, error) {
	res, err := t.reconcile(ctx, key)
	return res.loop(), err
}
