package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/datajobs/datajobs/bench/internal/stats"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
)

// converge runs, for each size, the floor and the synchronizer on the same N rendered
// CronJobs, in alternating order, cleaning the namespace in between. It returns the fleet
// of the last run of size keepN, left synced, for the noop and latency benchmarks.
func (b *bench) converge(ctx context.Context, sizes []int, repeat, repeatLarge, keepN int) (*fleet, error) {
	b.printf("## converge\n\n")
	b.printf("| N | run | order | floor (plain create) | synchronizer | ratio | CPU ratio | floor create p50 / p99 | synchronizer: Kubernetes writes / reads | database loads / write statements (rows) |\n")
	b.printf("|---|---|---|---|---|---|---|---|---|---|\n")
	var (
		kept     *fleet
		cpuLines []string
		ratios   = map[int][]float64{}
	)
	for _, n := range sizes {
		runs := repeat
		if n > 1000 {
			runs = repeatLarge
		}
		for r := range runs {
			last := r == runs-1
			keep := n == keepN && last
			syncFirst := r%2 == 1 && !keep
			f, err := newFleet(ctx, b, true)
			if err != nil {
				return kept, err
			}
			res, err := b.convergeRun(ctx, f, n, r, syncFirst)
			if err != nil {
				f.drop()
				return kept, err
			}
			if keep {
				if kept != nil {
					kept.drop()
				}
				kept = f
			} else {
				f.drop()
			}
			ratio := res.sync.Seconds() / res.floor.Seconds()
			ratios[n] = append(ratios[n], ratio)
			order := "floor, sync"
			if syncFirst {
				order = "sync, floor"
			}
			p := stats.Percentiles(res.floorLatencies, 50, 99)
			b.printf("| %d | %d | %s | %s | %s | %.2fx | %.2fx | %s / %s | %s |\n", n, r+1, order, secs(res.floor), secs(res.sync),
				ratio, res.syncCPU.ours()/res.floorCPU.ours(), ms(p[0]), ms(p[1]), res.calls)
			cpuLines = append(cpuLines,
				fmt.Sprintf("- N=%d run %d: populate %s; floor: %s; synchronizer: %s", n, r+1, secs(res.populate), res.floorCPU, res.syncCPU))
			for _, x := range res.extras {
				cpuLines = append(cpuLines, fmt.Sprintf("  - floor variant %q: %s (%.2fx the floor; CPU ratio %.2fx): %s",
					x.name, secs(x.took), x.took.Seconds()/res.floor.Seconds(), x.cpu.ours()/res.floorCPU.ours(), x.cpu))
			}
		}
	}
	b.printf("\n")
	for _, n := range sizes {
		rs := slices.Clone(ratios[n])
		slices.Sort(rs)
		if len(rs) > 0 {
			b.printf("N=%d: median ratio %.2fx over %d run(s)\n", n, rs[len(rs)/2], len(rs))
		}
	}
	b.printf("\nThe CPU ratio compares the CPU seconds used by the benchmark's own processes (this program, apiserver, etcd, " +
		"PostgreSQL, controllers) during each phase; unlike the wall-time ratio it does not depend on what others ran meanwhile.\n")
	b.printf("\nCPU seconds per process group during each phase (2 cores = 2 s of CPU per second):\n\n")
	for _, l := range cpuLines {
		b.printf("%s\n", l)
	}
	b.printf("\n")
	return kept, nil
}

// variantResult is one run of a variant of the floor.
type variantResult struct {
	name string
	took time.Duration
	cpu  cpuReport
}

type convergeResult struct {
	populate, floor, sync time.Duration
	floorLatencies        []time.Duration
	extras                []variantResult // -floor-variants
	calls                 convergeCalls
	floorCPU, syncCPU     cpuReport
}

func (b *bench) convergeRun(ctx context.Context, f *fleet, n, run int, syncFirst bool) (convergeResult, error) {
	var res convergeResult
	names := jobNames(n)
	began := time.Now()
	if err := f.createJobs(ctx, names, 8); err != nil {
		return res, fmt.Errorf("create jobs: %w", err)
	}
	if err := f.deployJobs(ctx, names, 8); err != nil {
		return res, fmt.Errorf("deploy jobs: %w", err)
	}
	res.populate = time.Since(began)
	b.log.InfoContext(ctx, "populated", "n", n, "took", res.populate)
	objs, err := f.rendered(ctx)
	if err != nil {
		return res, err
	}
	floor := func() error {
		c0 := b.cpu.sample()
		d, lat, err := b.floor(ctx, f.ns, objs)
		res.floorCPU = c0.to(b.cpu.sample())
		if err != nil {
			return fmt.Errorf("floor: %w", err)
		}
		res.floor, res.floorLatencies = d, lat
		b.log.InfoContext(ctx, "floor_done", "n", n, "took", d)
		return b.verifyAndClean(ctx, f.ns, n, !syncFirst)
	}
	syncer := func() error {
		c0 := b.cpu.sample()
		err := b.profile(fmt.Sprintf("converge-%d-run%d", n, run+1), func() error {
			var err error
			res.sync, res.calls, err = b.syncConverge(ctx, f, n, fmt.Sprintf("converge-%d-run%d", n, run+1))
			return err
		})
		res.syncCPU = c0.to(b.cpu.sample())
		if err != nil {
			return fmt.Errorf("synchronizer: %w", err)
		}
		b.log.InfoContext(ctx, "sync_done", "n", n, "took", res.sync)
		return b.verifyAndClean(ctx, f.ns, n, syncFirst)
	}
	steps := []func() error{floor, syncer}
	if syncFirst {
		steps = []func() error{syncer, floor}
	}
	// Variants of the floor that add, one at a time, what the synchronizer does besides
	// applying: a GET of the name before each apply (its create path), and a watch of the
	// namespace's managed CronJobs feeding an informer cache.
	for _, v := range b.floorVariants {
		steps = append([]func() error{func() error {
			c0 := b.cpu.sample()
			d, _, err := b.floorWith(ctx, f.ns, objs, strings.Contains(v, "get"), strings.Contains(v, "watch"))
			cpu := c0.to(b.cpu.sample())
			if err != nil {
				return fmt.Errorf("floor variant %s: %w", v, err)
			}
			res.extras = append(res.extras, variantResult{name: v, took: d, cpu: cpu})
			return b.verifyAndClean(ctx, f.ns, n, true)
		}}, steps...)
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return res, err
		}
	}
	return res, nil
}

// verifyAndClean checks that the namespace has n CronJobs, and deletes them when clean.
func (b *bench) verifyAndClean(ctx context.Context, ns string, n int, clean bool) error {
	got, err := countCronJobs(ctx, b.admin, ns)
	if err != nil {
		return err
	}
	if got != n {
		return fmt.Errorf("%d CronJobs in %s, want %d", got, ns, n)
	}
	if !clean {
		return nil
	}
	began := time.Now()
	if err := cleanNamespace(ctx, b.admin, ns); err != nil {
		return err
	}
	b.log.InfoContext(ctx, "namespace_cleaned", "n", n, "took", time.Since(began))
	// Let the controllers and etcd settle after the mass delete before the next phase.
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(3 * time.Second):
	}
	return nil
}

// rendered renders every deployment of the fleet as the synchronizer will, sorted by name.
func (f *fleet) rendered(ctx context.Context) ([]*batchv1.CronJob, error) {
	return f.renderedWith(ctx, nil)
}

// renderedWith is rendered with each deployment first changed by edit (nil: none), as a
// change not yet stored would render it.
func (f *fleet) renderedWith(ctx context.Context, edit func(*job.Deployment)) ([]*batchv1.CronJob, error) {
	states, err := f.db.LoadAllSyncStates(ctx)
	if err != nil {
		return nil, err
	}
	var out []*batchv1.CronJob
	for _, st := range states {
		if st.Job != nil && st.Desired != nil {
			d := *st.Desired
			if edit != nil {
				edit(&d)
			}
			cj, _ := kube.Render(*st.Job, d, f.render)
			out = append(out, cj)
		}
	}
	slices.SortFunc(out, func(a, b *batchv1.CronJob) int {
		if a.Name < b.Name {
			return -1
		}
		return 1
	})
	return out, nil
}

// floor is the minimal client-go program: it creates the rendered CronJobs with plain
// creates, b.workers at a time, with the synchronizer's client limits, and returns the
// wall time and each request's latency.
func (b *bench) floor(ctx context.Context, ns string, objs []*batchv1.CronJob) (time.Duration, []time.Duration, error) {
	return b.floorWith(ctx, ns, objs, false, false)
}

// floorWith is the floor, reading each name (expecting it absent) before creating it
// when get is set, and with an informer on the namespace's CronJobs when watch is.
func (b *bench) floorWith(ctx context.Context, ns string, objs []*batchv1.CronJob, get, watch bool) (time.Duration, []time.Duration, error) {
	cs, err := b.clientset(ctx, nil)
	if err != nil {
		return 0, nil, err
	}
	idx := make([]int, len(objs))
	for i := range objs {
		idx[i] = i
	}
	if watch {
		factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
		informer := factory.Batch().V1().CronJobs().Informer()
		var events atomic.Int64
		if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(any) { events.Add(1) }}); err != nil {
			return 0, nil, err
		}
		stop := make(chan struct{})
		factory.Start(stop)
		defer factory.Shutdown()
		defer close(stop)
		if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
			return 0, nil, ctx.Err()
		}
	}
	lat := make([]time.Duration, len(objs))
	start := time.Now()
	err = parallel(ctx, idx, b.workers, func(ctx context.Context, i int) error {
		t := time.Now()
		if get {
			if _, err := cs.BatchV1().CronJobs(ns).Get(ctx, objs[i].Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("get %s: want not found, got %w", objs[i].Name, err)
			}
		}
		_, err := cs.BatchV1().CronJobs(ns).Create(ctx, objs[i], metav1.CreateOptions{FieldManager: kube.FieldManager})
		lat[i] = time.Since(t)
		return err
	})
	return time.Since(start), lat, err
}

// syncConverge runs a fresh synchronizer on the fleet until every deployment is recorded
// as synced, and returns the wall time from its start and the requests it made.
// convergeCalls are what a synchronizer's converge asked of Kubernetes and the database.
type convergeCalls struct {
	k8s *requestCounter
	db  *observedStore
}

func (c convergeCalls) String() string {
	return fmt.Sprintf("%d / %d | %d / %d (%d rows)", c.k8s.writes.Load(), c.k8s.reads.Load(),
		c.db.loads.Load(), c.db.writes.Load(), c.db.rows.Load())
}

func (b *bench) syncConverge(ctx context.Context, f *fleet, n int, logName string) (time.Duration, convergeCalls, error) {
	counter := &requestCounter{}
	cs, err := b.clientset(ctx, counter)
	if err != nil {
		return 0, convergeCalls{}, err
	}
	logFile, err := os.Create(filepath.Join(b.outDir, logName+".log"))
	if err != nil {
		return 0, convergeCalls{}, err
	}
	defer logFile.Close()
	// The clock stops when the n-th applied row has been written: every CronJob was then
	// created and recorded (the database is checked once afterwards, not polled).
	obs := newObservedStore(f.db, n)
	s := b.syncer(f, obs, cs, time.Hour, slog.New(slog.NewJSONHandler(logFile, nil)), nil)
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var runErr error
	start := time.Now()
	wg.Go(func() { runErr = s.Run(runCtx, f.epoch) })
	var took time.Duration
	select {
	case <-obs.allApplied:
		took = time.Since(start)
	case <-time.After(max(10*time.Minute, time.Duration(n)*20*time.Millisecond)): // 100,000 at load 45 ran at ~100/s
	case <-ctx.Done():
	}
	cancel()
	wg.Wait()
	if runErr != nil {
		return 0, convergeCalls{}, runErr
	}
	if took == 0 {
		return 0, convergeCalls{}, fmt.Errorf("%d of %d deployments applied in time", obs.applied.Load(), n)
	}
	synced, err := f.syncedCount(ctx)
	if err != nil {
		return 0, convergeCalls{}, fmt.Errorf("count synced deployments: %w", err)
	}
	if synced != n {
		return 0, convergeCalls{}, fmt.Errorf("%d of %d deployments synced in the database", synced, n)
	}
	return took, convergeCalls{k8s: counter, db: obs}, nil
}
