package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/synchronizer"
)

// memory measures what the leader keeps in memory for the fleet's synced CronJobs, in
// this process (load-insensitive: bytes, not time):
//   - the Go heap an informer cache of the namespace's CronJobs holds, with whole objects
//     (as the leader kept them before issue 28) and with kube.Trim, the leader's transform;
//   - the Go heap and the process's RSS once a synchronizer term over them is idle.
func (b *bench) memory(ctx context.Context, f *fleet) error {
	n := len(f.names)
	b.printf("## memory (%d synced CronJobs)\n\n", n)
	b.printf("| what | Go heap in use (after GC) | per CronJob |\n|---|---|---|\n")
	var whole, trimmed uint64
	for _, tt := range []struct {
		name      string
		transform cache.TransformFunc
		into      *uint64
	}{{"informer cache, whole objects (before)", nil, &whole}, {"informer cache, kube.Trim (now)", kube.Trim, &trimmed}} {
		held, err := b.cacheHeap(ctx, f, tt.transform)
		if err != nil {
			return err
		}
		*tt.into = held
		b.printf("| %s | %s | %.1f KiB |\n", tt.name, mib(held), float64(held)/1024/float64(n))
	}
	heap, rss, err := b.termMemory(ctx, f)
	if err != nil {
		return err
	}
	b.printf("| synchronizer term, idle after its first pass (this process: also the benchmark's store and clients) | %s (RSS %s) | %.1f KiB |\n",
		mib(heap), mib(rss), float64(heap)/1024/float64(n))
	if size, err := b.etcdSize(ctx); err == nil {
		b.printf("\netcd's database (the apiserver's apiserver_storage_size_bytes) holds %s with these %d CronJobs: %.1f KiB each at most, against etcd's default 2 GiB quota (the environment sets none)\n", mib(size), n, float64(size)/1024/float64(n))
	} else {
		b.printf("\netcd's size unknown: %v\n", err)
	}
	if trimmed > 0 {
		b.printf("\nthe cache's heap with kube.Trim is %.2fx that of whole objects\n\n", float64(trimmed)/float64(whole))
	}
	return nil
}

// cacheHeap lists the namespace's CronJobs into an informer cache with transform and
// returns the heap it holds: the heap in use after a GC with the cache, less that before.
func (b *bench) cacheHeap(ctx context.Context, f *fleet, transform cache.TransformFunc) (uint64, error) {
	cs, err := b.clientset(ctx, nil)
	if err != nil {
		return 0, err
	}
	before := heapInUse()
	opts := []informers.SharedInformerOption{informers.WithNamespace(f.ns)}
	if transform != nil {
		opts = append(opts, informers.WithTransform(transform))
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, opts...)
	informer := factory.Batch().V1().CronJobs().Informer()
	runCtx, cancel := context.WithCancel(ctx)
	factory.Start(runCtx.Done())
	defer func() {
		cancel()
		factory.Shutdown()
		heapInUse() // leave the next measurement a collected heap
	}()
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return 0, fmt.Errorf("cronjob cache did not sync: %w", ctx.Err())
	}
	if got := len(informer.GetStore().ListKeys()); got != len(f.names) {
		return 0, fmt.Errorf("cache holds %d CronJobs, want %d", got, len(f.names))
	}
	after := heapInUse()
	runtime.KeepAlive(informer)
	if after < before {
		return 0, nil
	}
	return after - before, nil
}

// termMemory runs a synchronizer term over the fleet until it is idle after its first
// pass, and returns the heap in use after a GC and the process's RSS then.
func (b *bench) termMemory(ctx context.Context, f *fleet) (heap, rss uint64, err error) {
	cs, err := b.clientset(ctx, &requestCounter{})
	if err != nil {
		return 0, 0, err
	}
	reg := prometheus.NewRegistry()
	obs := newObservedStore(f.db, 0)
	s := b.syncer(f, obs, cs, time.Hour, nil, synchronizer.NewMetrics(reg))
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { _ = s.Run(runCtx, f.epoch) })
	if _, err := waitIdle(ctx, reg, obs, 0); err != nil {
		return 0, 0, err
	}
	heap = heapInUse()
	if prof, err := os.Create(filepath.Join(b.outDir, "memory-term.heap")); err == nil {
		_ = pprof.WriteHeapProfile(prof) // go tool pprof -sample_index=inuse_space
		prof.Close()
	}
	rss, err = processRSS(os.Getpid())
	runtime.KeepAlive(s)
	return heap, rss, err
}

// heapInUse collects garbage (twice: finalizers) and returns the heap in use.
func heapInUse() uint64 {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// processRSS is the resident set of process pid, from /proc.
func processRSS(pid int) (uint64, error) { return procStatus(pid, "VmRSS") }

func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// etcdSize is the size of the apiserver's etcd database, from its own metrics.
func (b *bench) etcdSize(ctx context.Context) (uint64, error) {
	raw, err := b.admin.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if strings.HasPrefix(line, "apiserver_storage_size_bytes{") {
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			return uint64(v), err
		}
	}
	return 0, fmt.Errorf("no apiserver_storage_size_bytes in the apiserver's metrics")
}
