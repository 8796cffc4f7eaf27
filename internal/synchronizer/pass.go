package synchronizer

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/store"
)

// pass plans every job name the database or the cluster knows of, in memory, decides
// every plan with the verdicts the pass makes (decidePass), and queues those that need
// work; the workers then reconcile each from fresh reads.
func (t *term) pass(ctx context.Context) ([]Plan, error) {
	start := time.Now()
	since := t.beginPass()
	plans, f, err := t.loadAndPlan(ctx)
	if err != nil {
		t.s.metrics.passDone(start, err)
		return nil, fmt.Errorf("resync: %w", err)
	}
	v := decidePass(plans, f, t.verdicts(), t.s.cfg, t.s.cfg.Now())
	if err := t.recordRestore(ctx, f.restore, v.restore); err != nil {
		t.s.metrics.passDone(start, err)
		return nil, err
	}
	t.s.recordPrune(ctx, v.prune)
	t.s.metrics.planned(plans)
	t.intendCreates(ctx, plans)
	queued := 0
	for _, p := range plans {
		t.s.recordPlan(p)
		if p.Action != ActionUnchanged && p.Action != ActionHold && p.Action != ActionKeep && p.Action != ActionRefuse {
			t.prefetch(p, since)
			t.queue.Add(p.Name)
			queued++
		} else {
			t.s.rememberUnchanged(p)
		}
	}
	if t.teams != nil {
		t.queue.Add(teamSecretsKey) // a team's first or last deployed job needs or frees its Secret
	}
	t.queue.Add(placementsKey) // a NOTIFY lost while the listener reconnected
	t.s.updateStatusGauge(ctx)
	t.s.metrics.passDone(start, nil)
	t.s.log.InfoContext(ctx, "resync_pass", "jobs", len(plans), "queued", queued, "full_read", f.full, "duration", time.Since(start))
	return plans, nil
}

// loadAndPlan is a pass's load and plan steps: it reads every state and the live
// CronJobs, plans every name, and returns what the pass found for its verdicts.
func (t *term) loadAndPlan(ctx context.Context) ([]Plan, passFindings, error) {
	// The restore guard compares CronJobs listed before the states are loaded (restore.go).
	earlier, err := t.lister.List(labels.Everything())
	if err != nil {
		return nil, passFindings{}, fmt.Errorf("list cronjobs from cache: %w", err)
	}
	states, full, err := t.readStates(ctx)
	if err != nil {
		return nil, passFindings{}, err
	}
	lives, err := t.lister.List(labels.Everything())
	if err != nil {
		return nil, passFindings{}, fmt.Errorf("list cronjobs from cache: %w", err)
	}
	lives = t.withOwnWrites(lives)
	issued, err := t.s.db.IssuedRevision(ctx)
	if err != nil {
		return nil, passFindings{}, fmt.Errorf("restore guard: %w", err)
	}
	t.prepareAll(states)
	f := passFindings{full: full, jobs: countJobs(states), restore: newerThanDatabase(earlier, states, issued, t.render.Installation)}
	var plans []Plan
	plans, f.owned = planAll(states, lives, t.render, t.s.memo)
	return plans, f, nil
}

// planAll plans every name found in the database states or among the live CronJobs, and
// counts the live CronJobs this installation owns.
func planAll(states map[string]job.SyncState, lives []*batchv1.CronJob, cfg kube.RenderConfig, memo func(string) *verified) ([]Plan, int) {
	live := make(map[string]*batchv1.CronJob, len(lives))
	ownedCount := 0
	for _, cj := range lives {
		st, known := states[cj.Name]
		mine := owned(cj, st, cfg.Installation)
		if mine {
			ownedCount++
		}
		if !known && !mine {
			continue // neither ours nor wanted: not even worth a line in the plan
		}
		live[cj.Name] = cj
		if !known {
			states[cj.Name] = job.SyncState{Name: cj.Name}
		}
	}
	plans := make([]Plan, len(states))
	names := make([]string, 0, len(states))
	for name := range states {
		names = append(names, name)
	}
	// Rendering and comparing are CPU-bound: plan on every core.
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(names); i += workers {
				plans[i] = plan(states[names[i]], live[names[i]], cfg, memo(names[i]))
				if plans[i].Action == ActionUnchanged {
					// Nothing will apply it: keeping every job's rendering until the pass
					// ends held all of them at once, 1.2 GB of a new leader's 1.7 GB peak
					// over 100,000 jobs (docs/benchmarks.md).
					plans[i].Rendered = nil
				}
			}
		})
	}
	wg.Wait()
	return plans, ownedCount
}

// A term keeps the states its passes read, and each pass after the first reads only the
// rows of the names changed since the previous one (the change log of migration 0026,
// store.LoadSyncChanges): a no-op pass over 100,000 jobs then reads no job row, where a
// full read decodes every one of them (issue 28). The log is exact for every write through
// SQL; what it cannot see is a change that bypasses its triggers (a TRUNCATE, a restore or
// a bulk load with triggers disabled, a failover to a database whose transaction ids
// differ while they happen to be ahead). A full read every FullReadInterval (default 1h)
// bounds how long such a change goes unnoticed; at 100,000 jobs it costs some seconds of
// CPU an hour. The store itself falls back to a full read when the database went back
// behind the cursor (a restore, its transaction ids or revisions lower than before).

// passStates is the term's copy of the database's sync states, as of its latest read.
// Only the pass writes it; mu orders its writes with has, which the NOTIFY listener asks.
type passStates struct {
	mu       sync.Mutex
	states   map[string]job.SyncState
	cursor   store.SyncCursor
	lastFull time.Time
}

// readStates brings the term's copy of the states up to date, by a full read the first
// time and every FullReadInterval, and by the changes since the previous read otherwise,
// and returns a copy for the pass to plan on (planning adds and prepares entries). It
// returns whether the read was full.
func (t *term) readStates(ctx context.Context) (map[string]job.SyncState, bool, error) {
	c := &t.passStates
	since := c.cursor
	if c.states == nil || t.s.cfg.Now().Sub(c.lastFull) >= t.s.cfg.FullReadInterval {
		since = store.SyncCursor{}
	}
	ch, err := t.s.db.LoadSyncChanges(ctx, since)
	if err != nil {
		return nil, false, err
	}
	c.mu.Lock()
	if ch.Full {
		c.states, c.lastFull = map[string]job.SyncState{}, t.s.cfg.Now() // not the read's map: sized for every target's jobs
		for name, st := range ch.States {
			if t.keeps(name, st) {
				c.states[name] = compact(st)
			}
		}
	} else {
		for _, name := range ch.Changed {
			if st, ok := ch.States[name]; ok && t.keeps(name, st) {
				c.states[name] = compact(st)
			} else {
				delete(c.states, name)
			}
		}
	}
	c.mu.Unlock()
	c.cursor = ch.Cursor
	if ch.Stale && !t.s.cfg.DryRun {
		// What the read before this one saw is in every later one's states: forget it.
		if _, err := t.s.db.PruneSyncChanges(ctx, t.fence, since); err != nil {
			t.s.log.WarnContext(ctx, "sync_change_prune_failed", "error", err)
		}
	}
	return maps.Clone(c.states), ch.Full, nil
}

// has reports whether the latest read kept a state of name.
func (c *passStates) has(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.states[name]
	return ok
}

// keeps reports whether the term keeps the state st of name that a read returned: not one
// of another target's job (job.SyncState.Elsewhere, nothing of it recorded in this
// target) whose CronJob the term's cache does not show. A shard's read returns every job
// of every other target so (store.TargetView), and the plan needs one only for a CronJob
// of its name in this namespace, a moved team's (planGone); kept, they made each
// replica's memory grow with all targets' jobs rather than its own shard's, and its
// passes plan them all. A CronJob of one that appears later is reconciled on its
// informer event, which reads the state by name; one kept goes at the next full read.
func (t *term) keeps(name string, st job.SyncState) bool {
	if st.Elsewhere == nil || st.Job != nil || st.Actual != nil || len(st.Intents) > 0 {
		return true
	}
	_, err := t.lister.Get(name)
	return !apierrors.IsNotFound(err)
}
