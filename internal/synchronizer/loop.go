package synchronizer

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/store"
)

// listen enqueues every job named in a NOTIFY from the API that is the shard's
// (sortNotices), reconnecting after a drop with backoff. Each (re)connection triggers a
// full pass, for what it may have missed.
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
		if t.holds(name) {
			t.changed(name)
			return
		}
		t.notices.add(name)
	})
}

// Every shard hears the NOTIFY of every job of every target. Queued, each of another
// target's jobs cost a read of its state by name and a place in the queue: in a converge
// of all targets at once each replica's queue, and the maps beside it, which never shrink,
// were sized for every target's jobs (issue 44). A name the shard holds (a state its
// passes keep, a CronJob in its cache) is queued at once; the others wait in notices, and
// one reader asks the database which of them are other targets' jobs, one read a batch,
// and queues the rest: the shard's new jobs, those moved to its target, deleted ones.
// A change it skips is its own only if the job's team moved here after the read, whose
// move sends the job's NOTIFY again; every changed name is read by the next pass anyway.

// notices are the notified names waiting for sortNotices.
type notices struct {
	mu    sync.Mutex
	names map[string]bool // nil when none wait: each batch's map is dropped with it
	ready chan struct{}   // buffered 1: names wait
}

func newNotices() *notices {
	return &notices{ready: make(chan struct{}, 1)}
}

// add adds name to those waiting.
func (n *notices) add(name string) {
	n.mu.Lock()
	if n.names == nil {
		n.names = map[string]bool{}
	}
	n.names[name] = true
	n.mu.Unlock()
	select {
	case n.ready <- struct{}{}:
	default:
	}
}

// take returns the names waiting, and forgets them.
func (n *notices) take() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	names := slices.Collect(maps.Keys(n.names))
	n.names = nil
	return names
}

// sortNotices queues the notified names that are not other targets' jobs, until ctx ends.
// A failed read queues them all: each reconcile reads its own.
func (t *term) sortNotices(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.notices.ready:
		}
		names := t.notices.take()
		elsewhere, err := t.s.db.JobsElsewhere(ctx, names)
		if err != nil && ctx.Err() == nil {
			t.s.log.WarnContext(ctx, "sync_notify_read_failed", "jobs", len(names), "error", err)
		}
		for _, name := range names {
			if !elsewhere[name] {
				t.changed(name)
			}
		}
	}
}

// holds reports whether the term holds anything of name: a state its passes keep or a
// CronJob in its cache.
func (t *term) holds(name string) bool {
	if t.passStates.has(name) {
		return true
	}
	_, err := t.lister.Get(name)
	return err == nil
}

// changed queues name, whose desired state changed (a NOTIFY).
func (t *term) changed(name string) {
	t.notify(name)
	t.queue.Add(name)
}
