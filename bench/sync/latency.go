package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/datajobs/datajobs/bench/internal/stats"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/synchronizer"
)

// observation is a CronJob's suspend flag as a watch delivered it.
type observation struct {
	name    string
	suspend bool
	at      time.Time
}

// latency runs a synchronizer live on the fleet and, once it is idle, makes changes one
// after the other: each flips a job's enabled flag through the service (as PATCH does)
// and waits until a watch on the namespace shows the CronJob's suspend flipped. The
// changes cycle through jobs targets (0: a different job for each change); with one, a
// change of a job comes 10 ms after the previous one was seen, before its bookkeeping
// would have ended if that waited for a timer.
func (b *bench) latency(ctx context.Context, f *fleet, changes, jobs int) error {
	n := len(f.names)
	counter := &requestCounter{}
	cs, err := b.clientset(ctx, counter)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	obs := newObservedStore(f.db, 0)
	logFile, err := os.Create(filepath.Join(b.outDir, "latency.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	s := b.syncer(f, obs, cs, 0, slog.New(slog.NewJSONHandler(logFile, nil)), synchronizer.NewMetrics(reg))
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { _ = s.Run(runCtx, f.epoch) })
	if _, err := waitIdle(ctx, reg, obs, 0); err != nil {
		return err
	}

	seen, err := b.watchSuspend(runCtx, &wg, f.ns)
	if err != nil {
		return err
	}

	distinct := min(changes, n)
	if jobs > 0 {
		distinct = min(distinct, jobs)
	}
	targets := make([]string, 0, distinct)
	b.printf("## latency (%d changes of %d jobs, synchronizer live over %d synced jobs)\n\n", changes, distinct, n)
	for i := range cap(targets) {
		targets = append(targets, f.names[i*n/cap(targets)])
	}
	enabled := map[string]bool{}
	for _, name := range targets {
		enabled[name] = true
	}
	writes0, reads0, dbWrites0 := counter.writes.Load(), counter.reads.Load(), obs.writes.Load()
	var total, api, async []time.Duration
	c0 := b.cpu.sample()
	err = b.profile("latency", func() error {
		for i := range changes {
			name := targets[i%len(targets)]
			want := !enabled[name]
			t0 := time.Now()
			if _, err := f.svc.PatchDeployment(ctx, team, name, job.DeploymentChange{Enabled: &want}, "bench"); err != nil {
				return err
			}
			t1 := time.Now()
			at, err := awaitSuspend(ctx, seen, name, !want)
			if err != nil {
				return fmt.Errorf("change %d (%s enabled=%v): %w", i, name, want, err)
			}
			total, api, async = append(total, at.Sub(t0)), append(api, t1.Sub(t0)), append(async, at.Sub(t1))
			enabled[name] = want
			time.Sleep(b.latencyGap)
		}
		return nil
	})
	cpu := c0.to(b.cpu.sample())
	if err != nil {
		return err
	}
	p := stats.Percentiles(total, 50, 90, 99, 100)
	pa := stats.Percentiles(api, 50, 99)
	pw := stats.Percentiles(async, 50, 99)
	b.printf("| | p50 | p90 | p99 | max |\n|---|---|---|---|---|\n")
	b.printf("| PATCH enabled → suspend seen by a watch | %s | %s | %s | %s |\n", ms(p[0]), ms(p[1]), ms(p[2]), ms(p[3]))
	b.printf("\nof which the service call (transaction + NOTIFY) p50 %s, p99 %s; after it returned p50 %s, p99 %s.\n",
		ms(pa[0]), ms(pa[1]), ms(pw[0]), ms(pw[1]))
	b.printf("During the %d changes the synchronizer sent %d write and %d read requests to Kubernetes, and made %d database write calls.\n",
		changes, counter.writes.Load()-writes0, counter.reads.Load()-reads0, obs.writes.Load()-dbWrites0)
	b.printf("\nCPU during the changes: %s\n\n", cpu)

	// The floor: the same service calls with no synchronizer recording beside them. A
	// call costs its transaction; with the synchronizer live, it also queues behind the
	// synchronizer's record of the same job (one lock order: docs/architecture.md, "A
	// job's rows"), or, before issue 47, lost a deadlock to it and waited 1 s.
	cancel()
	wg.Wait()
	floor, err := b.serviceCalls(ctx, f, targets, enabled, changes, pw[0])
	if err != nil {
		return err
	}
	pf := stats.Percentiles(floor, 50, 99, 100)
	pl := stats.Percentiles(api, 100)
	b.printf("| request sent → answered (the service call under PATCH) | p50 | p99 | max |\n|---|---|---|---|\n")
	b.printf("| synchronizer live, recording each change | %s | %s | %s |\n", ms(pa[0]), ms(pa[1]), ms(pl[0]))
	b.printf("| synchronizer off (the floor) | %s | %s | %s |\n", ms(pf[0]), ms(pf[1]), ms(pf[2]))
	b.printf("\np99 %.2fx the floor's.\n\n", float64(pa[1])/float64(pf[1]))
	return nil
}

// serviceCalls makes the latency scenario's changes with no synchronizer running, paced
// as they were with it (-latency-gap and the change's usual time to the cluster apart), and
// returns each call's duration.
func (b *bench) serviceCalls(ctx context.Context, f *fleet, targets []string, enabled map[string]bool, changes int, pace time.Duration) ([]time.Duration, error) {
	calls := make([]time.Duration, 0, changes)
	for i := range changes {
		name := targets[i%len(targets)]
		want := !enabled[name]
		t0 := time.Now()
		if _, err := f.svc.PatchDeployment(ctx, team, name, job.DeploymentChange{Enabled: &want}, "bench"); err != nil {
			return nil, err
		}
		calls = append(calls, time.Since(t0))
		enabled[name] = want
		time.Sleep(b.latencyGap + pace)
	}
	return calls, nil
}

// watchSuspend watches the CronJobs of ns from now on and sends the suspend flag of each
// one modified, until ctx ends.
func (b *bench) watchSuspend(ctx context.Context, wg *sync.WaitGroup, ns string) (<-chan observation, error) {
	list, err := b.admin.BatchV1().CronJobs(ns).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return nil, err
	}
	w, err := b.admin.BatchV1().CronJobs(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		return nil, err
	}
	seen := make(chan observation, 1024)
	wg.Go(func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			cj, ok := ev.Object.(*batchv1.CronJob)
			if ev.Type != watch.Modified || !ok || cj.Spec.Suspend == nil {
				continue
			}
			select {
			case seen <- observation{name: cj.Name, suspend: *cj.Spec.Suspend, at: time.Now()}:
			case <-ctx.Done():
				return
			}
		}
	})
	return seen, nil
}

// awaitSuspend waits, for at most 10 s, until seen shows name's CronJob with suspend, and
// returns when the watch delivered it.
func awaitSuspend(ctx context.Context, seen <-chan observation, name string, suspend bool) (time.Time, error) {
	timeout := time.After(10 * time.Second)
	for {
		select {
		case o := <-seen:
			if o.name == name && o.suspend == suspend {
				return o.at, nil
			}
		case <-timeout:
			return time.Time{}, errors.New("not seen in 10 s")
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}
}
