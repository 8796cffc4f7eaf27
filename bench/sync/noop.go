package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/synchronizer"
)

// syncedFleet creates n jobs and converges them (untimed), for noop and latency.
func (b *bench) syncedFleet(ctx context.Context, n int) (*fleet, error) {
	f, err := newFleet(ctx, b, true)
	if err != nil {
		return nil, err
	}
	names := jobNames(n)
	if err := f.createJobs(ctx, names, 8); err != nil {
		f.drop()
		return nil, err
	}
	if err := f.deployJobs(ctx, names, 8); err != nil {
		f.drop()
		return nil, err
	}
	if _, _, err := b.syncConverge(ctx, f, n, fmt.Sprintf("setup-%d", n)); err != nil {
		f.drop()
		return nil, err
	}
	return f, nil
}

// observedStore passes every call to the real store and records what the benchmark needs
// to see from outside: the calls per method, and the span, allocations and CPU of each
// pass (a pass starts with LoadSyncChanges and ends with CountDeploymentsByStatus).
type observedStore struct {
	synchronizer.Store
	// writes counts the write calls (a batch of applied rows is one); rows counts the
	// applied rows handed to them.
	loads, writes, rows atomic.Int64
	// applied counts the applied rows written; allApplied is closed when it reaches
	// target (if target > 0).
	applied    atomic.Int64
	target     int64
	allApplied chan struct{}

	mu     sync.Mutex
	open   passSpan
	passes []passSpan
}

type passSpan struct {
	start, end      time.Time
	mallocs, allocs uint64 // objects and bytes allocated during the pass
	ms              runtime.MemStats
	// cpu is the CPU time (user and system) this process used during the pass; the
	// benchmark does nothing else meanwhile.
	cpu, cpu0 time.Duration
	full      bool // the pass read every row
	rows      int  // the states it read
}

// processCPU is the CPU time this process has used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (o *observedStore) LoadSyncState(ctx context.Context, name string) (job.SyncState, error) {
	o.loads.Add(1)
	return o.Store.LoadSyncState(ctx, name)
}

func (o *observedStore) LoadSyncChanges(ctx context.Context, since store.SyncCursor) (store.SyncChanges, error) {
	o.mu.Lock()
	runtime.ReadMemStats(&o.open.ms)
	o.open.start, o.open.cpu0 = time.Now(), processCPU()
	o.mu.Unlock()
	ch, err := o.Store.LoadSyncChanges(ctx, since)
	o.mu.Lock()
	o.open.full, o.open.rows = ch.Full, len(ch.States)
	o.mu.Unlock()
	return ch, err
}

func (o *observedStore) PruneSyncChanges(ctx context.Context, fence job.Fence, before store.SyncCursor) (int64, error) {
	o.writes.Add(1)
	return o.Store.PruneSyncChanges(ctx, fence, before)
}

func (o *observedStore) CountDeploymentsByStatus(ctx context.Context) (map[job.SyncStatus]int, error) {
	counts, err := o.Store.CountDeploymentsByStatus(ctx)
	o.mu.Lock()
	defer o.mu.Unlock()
	end := time.Now()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	p := o.open
	p.end, p.mallocs, p.allocs, p.cpu = end, ms.Mallocs-p.ms.Mallocs, ms.TotalAlloc-p.ms.TotalAlloc, processCPU()-p.cpu0
	o.passes = append(o.passes, p)
	return counts, err
}

func newObservedStore(db synchronizer.Store, target int) *observedStore {
	return &observedStore{Store: db, target: int64(target), allApplied: make(chan struct{})}
}

func (o *observedStore) RecordAppliedAll(ctx context.Context, fence job.Fence, as []job.ActualDeployment) ([]bool, error) {
	o.writes.Add(1)
	o.rows.Add(int64(len(as)))
	wrote, err := o.Store.RecordAppliedAll(ctx, fence, as)
	for _, ok := range wrote {
		if ok && o.applied.Add(1) == o.target {
			close(o.allApplied)
		}
	}
	return wrote, err
}

func (o *observedStore) RecordIntents(ctx context.Context, fence job.Fence, is []job.Intent) ([]bool, error) {
	o.writes.Add(1)
	return o.Store.RecordIntents(ctx, fence, is)
}

func (o *observedStore) RecordUnappliedStatus(ctx context.Context, fence job.Fence, name, uid string, gen int64, status job.SyncStatus, message string) (bool, error) {
	o.writes.Add(1)
	return o.Store.RecordUnappliedStatus(ctx, fence, name, uid, gen, status, message)
}

func (o *observedStore) DeleteActual(ctx context.Context, fence job.Fence, name, uid string) (bool, error) {
	o.writes.Add(1)
	return o.Store.DeleteActual(ctx, fence, name, uid)
}

func (o *observedStore) passList() []passSpan {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]passSpan(nil), o.passes...)
}

// snapshot is what must not change in a no-op: every row's xmin, every CronJob's
// resourceVersion.
type snapshot struct {
	rows, cronJobs map[string]string
}

func (b *bench) snapshot(ctx context.Context, f *fleet) (snapshot, error) {
	rows, err := f.rowVersions(ctx)
	if err != nil {
		return snapshot{}, err
	}
	cjs, err := cronJobVersions(ctx, b.admin, f.ns)
	return snapshot{rows: rows, cronJobs: cjs}, err
}

// noop measures passes over the fleet's synced jobs: a fresh RunOnce, then a running term
// (its start-up, then warm passes), checking that none writes to Kubernetes or the database.
func (b *bench) noop(ctx context.Context, f *fleet) error {
	n := len(f.names)
	b.printf("## noop (%d synced jobs)\n\n", n)
	before, err := b.snapshot(ctx, f)
	if err != nil {
		return err
	}
	if len(before.cronJobs) != n {
		return fmt.Errorf("%d CronJobs, want %d", len(before.cronJobs), n)
	}
	b.printf("| pass | time | of which load+plan | allocations | Kubernetes writes (requests) | Kubernetes reads | DB write calls | rows changed (xmin) | CronJobs changed (resourceVersion) |\n")
	b.printf("|---|---|---|---|---|---|---|---|---|\n")

	// Fresh: RunOnce, which starts a term (informer list), plans everything and executes
	// each plan.
	counter := &requestCounter{}
	cs, err := b.clientset(ctx, counter)
	if err != nil {
		return err
	}
	obs := newObservedStore(f.db, 0)
	s := b.syncer(f, obs, cs, time.Hour, nil, nil)
	var ms0, ms1 runtime.MemStats
	var rep synchronizer.Report
	c0 := b.cpu.sample()
	err = b.profile("noop-runonce", func() error {
		runtime.ReadMemStats(&ms0)
		start := time.Now()
		var err error
		rep, err = s.RunOnce(ctx, f.epoch)
		took := time.Since(start)
		runtime.ReadMemStats(&ms1)
		if err != nil {
			return err
		}
		if len(rep.Errors) > 0 || rep.Summary()[synchronizer.ActionUnchanged] != n {
			return fmt.Errorf("RunOnce: %d errors, plans %v", len(rep.Errors), rep.Summary())
		}
		after, err := b.snapshot(ctx, f)
		if err != nil {
			return err
		}
		passes := obs.passList()
		b.printf("| fresh: RunOnce (informer list + pass + execute %d plans) | %s | %s | %d objects, %.0f MB | %d | %d | %d | %d of %d | %d of %d |\n",
			n, ms(took), ms(passes[0].end.Sub(passes[0].start)), ms1.Mallocs-ms0.Mallocs, float64(ms1.TotalAlloc-ms0.TotalAlloc)/1e6,
			counter.writes.Load(), counter.reads.Load(), obs.writes.Load(),
			changed(before.rows, after.rows), len(before.rows), changed(before.cronJobs, after.cronJobs), n)
		return nil
	})
	cpuRunOnce := c0.to(b.cpu.sample())
	if err != nil {
		return err
	}

	// A running term: its start-up (the informer's initial list queues every name, and a
	// first full pass), then warm passes every resync interval.
	term, err := b.noopTerm(ctx, f, n)
	if err != nil {
		return err
	}
	b.printf("| fresh: Run term start-up until idle (%d single-job reconciles + first pass); writes and changes counted over the whole term | %s | %s | %d objects, %.0f MB | %d | %d | %d | %d of %d | %d of %d |\n",
		term.loads, ms(term.startup), ms(term.firstPass), term.startupMallocs, float64(term.startupBytes)/1e6,
		term.k8sWrites, term.k8sReads, term.dbWrites, term.rowsChanged, len(before.rows), term.cronJobsChanged, n)
	for i, p := range term.warm {
		kind := "changes since the previous pass"
		if p.full {
			kind = "full read"
		}
		b.printf("| warm: resync pass %d (%s: %d states read; CPU %s) | %s | %s | %d objects, %.1f MB | (in the row above) | | | | |\n",
			i+1, kind, p.rows, ms(p.cpu), ms(p.end.Sub(p.start)), ms(p.end.Sub(p.start)), p.mallocs, float64(p.allocs)/1e6)
	}
	b.printf("\nCPU during RunOnce: %s\n\nCPU during the running term (start-up and %d warm passes): %s\n\n", cpuRunOnce, len(term.warm), term.cpu)
	return nil
}

type termResult struct {
	startup, firstPass            time.Duration
	loads                         int64
	startupMallocs, startupBytes  uint64
	warm                          []passSpan
	k8sWrites, k8sReads, dbWrites int64
	rowsChanged, cronJobsChanged  int
	cpu                           cpuReport
}

// noopTerm runs a fresh synchronizer with a 2 s resync until it has made 3 warm passes
// after its start-up work is done, then checks what it wrote.
func (b *bench) noopTerm(ctx context.Context, f *fleet, n int) (termResult, error) {
	var res termResult
	before, err := b.snapshot(ctx, f)
	if err != nil {
		return res, err
	}
	counter := &requestCounter{}
	cs, err := b.clientset(ctx, counter)
	if err != nil {
		return res, err
	}
	reg := prometheus.NewRegistry()
	obs := newObservedStore(f.db, 0)
	logFile, err := os.Create(filepath.Join(b.outDir, "noop-term.log"))
	if err != nil {
		return res, err
	}
	defer logFile.Close()
	s := b.syncer(f, obs, cs, 2*time.Second, slog.New(slog.NewJSONHandler(logFile, nil)), synchronizer.NewMetrics(reg))

	c0 := b.cpu.sample()
	err = b.profile("noop-term", func() error {
		runCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		start := time.Now()
		wg.Go(func() { _ = s.Run(runCtx, f.epoch) })
		at, err := waitIdle(ctx, reg, obs, 0)
		if err != nil {
			return err
		}
		res.startup = at.Sub(start)
		runtime.ReadMemStats(&ms1)
		res.startupMallocs, res.startupBytes = ms1.Mallocs-ms0.Mallocs, ms1.TotalAlloc-ms0.TotalAlloc
		res.loads = obs.loads.Load()
		first := obs.passList()[0]
		res.firstPass = first.end.Sub(first.start)
		idleAt := time.Now()
		for {
			var warm []passSpan
			for _, p := range obs.passList() {
				if p.start.After(idleAt) {
					warm = append(warm, p)
				}
			}
			if len(warm) >= 3 {
				res.warm = warm[:3]
				break
			}
			if time.Since(idleAt) > time.Minute || ctx.Err() != nil {
				return fmt.Errorf("no warm passes")
			}
			time.Sleep(50 * time.Millisecond)
		}
		return nil
	})
	res.cpu = c0.to(b.cpu.sample())
	if err != nil {
		return res, err
	}
	after, err := b.snapshot(ctx, f)
	if err != nil {
		return res, err
	}
	res.k8sWrites, res.k8sReads, res.dbWrites = counter.writes.Load(), counter.reads.Load(), obs.writes.Load()
	res.rowsChanged, res.cronJobsChanged = changed(before.rows, after.rows), changed(before.cronJobs, after.cronJobs)
	return res, nil
}

// waitIdle waits until a term's start-up work is done: a full pass has ended (the term's
// first: obs had seen passesBefore passes when the term started), the queue is empty and
// no reconcile has finished for 300 ms. It returns when the last one did. Counting only
// the term's own passes matters when obs outlives a term: sustained restarted the
// synchronizer after its floors and, counting the earlier term's passes, measured the
// next rate during the new term's start-up and its repair of the floors' 1,200 writes
// (a first 10 s window at p99 12.9 s for 50/s).
func waitIdle(ctx context.Context, reg *prometheus.Registry, obs *observedStore, passesBefore int) (time.Time, error) {
	deadline := time.Now().Add(3 * time.Minute)
	last, lastAt := -1.0, time.Now()
	for {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return time.Time{}, fmt.Errorf("the synchronizer did not become idle: %d reconciles, %d passes", obs.loads.Load(), len(obs.passList()))
		}
		reconciled, depth := gatherSync(reg)
		if reconciled != last || depth != 0 || len(obs.passList()) <= passesBefore {
			last, lastAt = reconciled, time.Now()
		} else if time.Since(lastAt) >= 300*time.Millisecond {
			if p := obs.passList(); p[passesBefore].end.After(lastAt) {
				return p[passesBefore].end, nil
			}
			return lastAt, nil
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// gatherSync reads the total of reconciles and the queue depth from the synchronizer's
// metrics.
func gatherSync(reg *prometheus.Registry) (reconciled, depth float64) {
	mfs, err := reg.Gather()
	if err != nil {
		return 0, -1
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "datajobs_sync_reconciles_total":
			for _, m := range mf.GetMetric() {
				reconciled += m.GetCounter().GetValue()
			}
		case "datajobs_sync_queue_depth":
			for _, m := range mf.GetMetric() {
				depth += m.GetGauge().GetValue()
			}
		}
	}
	return reconciled, depth
}
