package synchronizer

import (
	"context"
	"fmt"

	"github.com/datajobs/datajobs/internal/job"
	batchv1 "k8s.io/api/batch/v1"
)

// A full pass reads every row in one go and queues the names that need work. For a name it
// queues for a create (no CronJob yet), the reconcile that follows takes the state that
// pass read instead of reading it again, once, and only while the cache still shows no
// CronJob of that name: a mass converge (a new cluster, an import, a restore) then costs
// a rendering and a create per job, not a database round trip too. (The rendering is not
// kept from the pass: held for every queued job it would be the largest part of the
// leader's memory during such a converge.) It is as fresh as a read at
// dequeue time would be for the database's part, because every change of desired state
// sends a NOTIFY in its transaction: a notification drops the name's prefetched state,
// and a pass does not prefetch a name notified after it began reading. Jobs whose image
// datajobs builds are always read afresh (a build's outcome sends no NOTIFY). Whatever the
// state, the database writes stay fenced on the job's incarnation and generation, so a
// create from a state that moved on is recorded nowhere and planned again. At most
// PrefetchLimit states are held so (some KiB each): a pass that queues 100,000 creates
// holds 10,000 of them, not all, and the others read theirs when they are dequeued.

// beginPass drops every prefetched state (the pass about to read will prefetch afresh:
// a LISTEN reconnect's pass may know of changes no notification told) and returns the
// count of notifications so far, for the pass to compare. It forgets the names notified
// so far too: their counts are at most the one returned, which no prefetch of this pass
// or a later one compares above, and a term that lives for months through a flood of
// changes to ever new names keeps only those notified since its latest pass.
func (t *term) beginPass() int64 {
	t.prefetchMu.Lock()
	defer t.prefetchMu.Unlock()
	clear(t.prefetched)
	clear(t.notified)
	return t.notifies
}

// notify notes a NOTIFY for name: its desired state changed.
func (t *term) notify(name string) {
	t.prefetchMu.Lock()
	defer t.prefetchMu.Unlock()
	t.notifies++
	t.notified[name] = t.notifies
	delete(t.prefetched, name)
}

// prefetch keeps p, a create planned by a pass that began after since notifications, for
// its job's next reconcile, unless the job was notified meanwhile or its image is built by
// datajobs.
func (t *term) prefetch(p Plan, since int64) {
	st := p.State
	if p.Action != ActionCreate || st.Job == nil || st.Desired == nil || (st.Build != nil && st.Build.SourceStored) {
		return
	}
	t.prefetchMu.Lock()
	defer t.prefetchMu.Unlock()
	if t.notified[p.Name] > since || len(t.prefetched) >= t.s.cfg.PrefetchLimit {
		return // beyond the limit, a create reads its state when it is dequeued
	}
	// The rendered CronJob is not kept: a mass converge queues a create for every job,
	// and their renderings, some KiB each, would all be held until the queue drains.
	// prefetchedPlan renders again, from the same state.
	p.Rendered, p.Hash = nil, ""
	t.prefetched[p.Name] = p
}

// prefetchedPlan returns the create a pass planned for name, planned again from the
// state that pass read, if any and the cache still shows no CronJob of that name; it is
// taken once.
func (t *term) prefetchedPlan(name string) (Plan, bool, error) {
	t.prefetchMu.Lock()
	p, ok := t.prefetched[name]
	delete(t.prefetched, name)
	t.prefetchMu.Unlock()
	if !ok {
		return Plan{}, false, nil
	}
	live, err := t.live(name)
	if err != nil || live != nil {
		return Plan{}, false, err
	}
	// plan is pure, and without a live CronJob it consults no memo: this is the plan
	// the pass made.
	return plan(p.State, nil, t.render, nil), true, nil
}

// load reads the state of name from the database and its live CronJob from the cache.
func (t *term) load(ctx context.Context, name string) (job.SyncState, *batchv1.CronJob, error) {
	st, err := t.s.db.LoadSyncState(ctx, name)
	if err != nil {
		t.s.metrics.reconciled("load", err)
		return job.SyncState{}, nil, fmt.Errorf("load state of %s: %w", name, err)
	}
	live, err := t.live(name)
	return st, live, err
}
