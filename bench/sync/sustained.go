package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/datajobs/datajobs/bench/internal/stats"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/synchronizer"
)

// sustainedRun is the outcome of one rate: every change's times, and the CPU meanwhile.
// What the rows and logs report is derived from the trace.
type sustainedRun struct {
	start time.Time
	// trace is every change made, in order; it is also written to the out folder.
	trace []changeTimes
	cpu   cpuReport
}

// changeTimes is when one change was made, its call returned and its CronJob was seen
// (zero: not seen within 10 s).
type changeTimes struct {
	name                 string
	made, returned, seen time.Time
}

// seen is the changes whose CronJob was seen.
func (r sustainedRun) seen() []changeTimes {
	var out []changeTimes
	for _, c := range r.trace {
		if !c.seen.IsZero() {
			out = append(out, c)
		}
	}
	return out
}

// durations is part(c) for each change c of cs.
func durations(cs []changeTimes, part func(changeTimes) time.Duration) []time.Duration {
	out := make([]time.Duration, len(cs))
	for i, c := range cs {
		out[i] = part(c)
	}
	return out
}

func latency(c changeTimes) time.Duration { return c.seen.Sub(c.made) }

// sustained drives changes at each rate for d, open loop (a change every 1/rate, whatever
// the previous ones' fate), each flipping a different job's enabled flag, and measures
// change → CronJob seen by a watch: through the service with a synchronizer running live
// on the fleet (first changes of their CronJobs, then the same jobs changed again), and,
// as the floors, on the same apiserver at the same rate: a bare client-go update loop
// (the floor: a whole CronJob written back from a copy the loop keeps) and plain
// merge patches of the CronJobs' suspend (the cheapest write there is).
func (b *bench) sustained(ctx context.Context, f *fleet, rates []int, d time.Duration) error {
	b.printf("## sustained changes (%s per rate, over %d synced jobs)\n\n", d, len(f.names))
	b.printf("| rate | path | changes made | seen ≤ 10 s | achieved rate | p50 | p99 | max | CPU |\n|---|---|---|---|---|---|---|---|---|\n")
	reg := prometheus.NewRegistry()
	obs := newObservedStore(f.db, 0)
	cs, err := b.clientset(ctx, nil)
	if err != nil {
		return err
	}
	s := b.syncer(f, obs, cs, 0, nil, synchronizer.NewMetrics(reg))
	// run starts a term of s and waits until it is idle; the function it returns ends it.
	run := func() (func(), error) {
		runCtx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		passes := len(obs.passList())
		wg.Go(func() { _ = s.Run(runCtx, f.epoch) })
		stop := func() { cancel(); wg.Wait() }
		if _, err := waitIdle(ctx, reg, obs, passes); err != nil {
			stop()
			return nil, err
		}
		return stop, nil
	}
	stop, err := run()
	if err != nil {
		return err
	}
	defer func() { stop() }() // the latest term's
	enabled := map[string]bool{}
	next := 0
	pick := func() (string, bool) { // a different job each change, round the fleet
		name := f.names[next%len(f.names)]
		next++
		was, ok := enabled[name]
		if !ok {
			was = true
		}
		enabled[name] = !was
		return name, !was
	}
	// The floors flip the CronJob away from what the database says, without changing it:
	// the synchronizer started again afterwards repairs them. floorSuspended is what the
	// floors left in each CronJob since, so that a later floor run flips it again.
	floorSuspended := map[string]bool{}
	pickFloor := func() (string, bool) {
		name := f.names[next%len(f.names)]
		next++
		suspended, ok := floorSuspended[name]
		if !ok {
			was, known := enabled[name]
			suspended = known && !was
		}
		floorSuspended[name] = !suspended
		return name, suspended // enabled as the floor writes it: suspend = !suspended
	}
	for _, rate := range rates {
		via := func(ctx context.Context, name string, want bool) error {
			_, err := f.svc.PatchDeployment(ctx, team, name, job.DeploymentChange{Enabled: &want}, "bench")
			return err
		}
		first := next
		res, err := b.drive(ctx, f, rate, d, fmt.Sprintf("sustained-%d", rate), pick, via)
		if err != nil {
			return err
		}
		b.printf("%s", res.row(rate, "service + synchronizer, first changes", d))
		windows, firstCalls, firstAfter := res.windows(), res.callP99(), res.afterP99()
		// The same jobs again: each CronJob's second change. Both are an apply alone since
		// the Applier creates by apply; a CronJob created plainly (by an older datajobs)
		// handed its fields over to the apply manager with its first change.
		next = first
		res, err = b.drive(ctx, f, rate, d, fmt.Sprintf("sustained-later-%d", rate), pick, via)
		if err != nil {
			return err
		}
		b.printf("%s", res.row(rate, "service + synchronizer, later changes", d))
		later, laterCalls, laterAfter := res.windows(), res.callP99(), res.afterP99()
		stop() // the floors write the CronJobs themselves: no synchronizer to repair them
		stop = func() {}
		floorClient, err := b.clientset(ctx, nil) // as the service's: protobuf, the same limits
		if err != nil {
			return err
		}
		update, err := b.updateFloor(ctx, f, floorClient)
		if err != nil {
			return err
		}
		res, err = b.drive(ctx, f, rate, d, fmt.Sprintf("sustained-floor-update-%d", rate), pickFloor, update)
		if err != nil {
			return err
		}
		b.printf("%s", res.row(rate, "floor: client-go update", d))
		updates := res.windows()
		patch := func(ctx context.Context, name string, want bool) error {
			patch := fmt.Sprintf(`{"spec":{"suspend":%v}}`, !want)
			_, err := floorClient.BatchV1().CronJobs(f.ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "bench-floor"})
			return err
		}
		res, err = b.drive(ctx, f, rate, d, fmt.Sprintf("sustained-floor-%d", rate), pickFloor, patch)
		if err != nil {
			return err
		}
		b.printf("%s", res.row(rate, "floor: client-go merge patch", d))
		b.log.InfoContext(ctx, "sustained_p99_by_10s_window", "rate", rate, "first", windows, "later", later, "floor_update", updates, "floor_patch", res.windows(),
			"first_call_p50_p99", firstCalls, "later_call_p50_p99", laterCalls, "first_after_call_p50_p99", firstAfter, "later_after_call_p50_p99", laterAfter)
		if stop, err = run(); err != nil { // it repairs the floors' writes first
			return err
		}
		clear(floorSuspended)
	}
	b.printf("\nCPU is of the whole run of one row (this process drives the changes and runs the synchronizer).\n\n")
	return nil
}

func (r sustainedRun) row(rate int, path string, d time.Duration) string {
	seen := r.seen()
	p := stats.Percentiles(durations(seen, latency), 50, 99, 100)
	var took time.Duration // from the first change to the last one seen
	for _, c := range seen {
		took = max(took, c.seen.Sub(r.start))
	}
	return fmt.Sprintf("| %d/s | %s | %d | %d | %.1f/s | %s | %s | %s | %s |\n", rate, path, len(r.trace), len(seen),
		float64(len(seen))/took.Seconds(), ms(p[0]), ms(p[1]), ms(p[2]), r.cpu)
}

// callP99 is the p50 and p99 of the change calls (from the change made to its call
// returned; for the service, the API's transaction), as "p50 / p99": to tell a tail in
// the write from one in the synchronizer.
func (r sustainedRun) callP99() string {
	var returned []changeTimes
	for _, c := range r.trace {
		if !c.returned.IsZero() {
			returned = append(returned, c)
		}
	}
	return p50p99(durations(returned, func(c changeTimes) time.Duration { return c.returned.Sub(c.made) }))
}

// afterP99 is the p50 and p99 of the part after each call (from its return to the
// CronJob seen: for the service, the synchronizer's part: notify, apply, watch), over
// the changes seen after their call returned, as "p50 / p99".
func (r sustainedRun) afterP99() string {
	var after []time.Duration
	for _, c := range r.seen() {
		if !c.returned.IsZero() && c.seen.After(c.returned) {
			after = append(after, c.seen.Sub(c.returned))
		}
	}
	return p50p99(after)
}

func p50p99(d []time.Duration) string {
	p := stats.Percentiles(d, 50, 99)
	return ms(p[0]) + " / " + ms(p[1])
}

// writeTrace writes the run's changes as CSV (name, made, then ms to return and to seen
// from made) to path.
func (r sustainedRun) writeTrace(path string) error {
	var out strings.Builder
	out.WriteString("job,made_unix_ms,returned_ms,seen_ms\n")
	for _, c := range r.trace {
		seen := "-"
		if !c.seen.IsZero() {
			seen = fmt.Sprintf("%.2f", float64(latency(c))/float64(time.Millisecond))
		}
		fmt.Fprintf(&out, "%s,%d,%.2f,%s\n", c.name, c.made.UnixMilli(), float64(c.returned.Sub(c.made))/float64(time.Millisecond), seen)
	}
	return os.WriteFile(path, []byte(out.String()), 0o644)
}

// windows is the p99 of the changes made in each 10 s window of the run, in ms: a stall
// shows as one bad window, a backlog as growing ones.
func (r sustainedRun) windows() string {
	var byWindow [][]time.Duration
	for _, c := range r.seen() {
		w := int(c.made.Sub(r.start) / (10 * time.Second))
		for len(byWindow) <= w {
			byWindow = append(byWindow, nil)
		}
		byWindow[w] = append(byWindow[w], latency(c))
	}
	out := make([]string, len(byWindow))
	for i, lat := range byWindow {
		out[i] = "-"
		if len(lat) > 0 {
			out[i] = fmt.Sprintf("%.0f", float64(stats.Percentiles(lat, 99)[0])/float64(time.Millisecond))
		}
	}
	return strings.Join(out, " ")
}

// watchCronJobs watches the CronJobs of ns from now on, until ctx ends. It is a
// RetryWatcher: it resumes from the last event's resourceVersion when the apiserver ends
// a watch (a 200/s run lost most of its events to a closed plain watch).
func (b *bench) watchCronJobs(ctx context.Context, ns string) (watch.Interface, error) {
	list, err := b.admin.BatchV1().CronJobs(ns).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return nil, err
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return b.admin.BatchV1().CronJobs(ns).Watch(ctx, o)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("watch cronjobs: %w", err)
	}
	return w, nil
}

// drive makes rate changes a second for d with change, each picked by pick, and waits up
// to 10 s for each to be seen by a watch on the namespace (suspend == !enabled).
func (b *bench) drive(ctx context.Context, f *fleet, rate int, d time.Duration, profile string,
	pick func() (string, bool), change func(context.Context, string, bool) error,
) (sustainedRun, error) {
	var run sustainedRun
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	w, err := b.watchCronJobs(watchCtx, f.ns)
	if err != nil {
		return run, err
	}
	defer w.Stop()
	type key struct {
		name    string
		suspend bool
	}
	var mu sync.Mutex
	pending := map[key]int{} // the change's index in run.trace
	c0 := b.cpu.sample()
	run.start = time.Now()
	var watching sync.WaitGroup
	watching.Go(func() {
		for ev := range w.ResultChan() {
			cj, ok := ev.Object.(*batchv1.CronJob)
			if ev.Type != watch.Modified || !ok || cj.Spec.Suspend == nil {
				continue
			}
			k := key{cj.Name, *cj.Spec.Suspend}
			mu.Lock()
			if i, ok := pending[k]; ok {
				run.trace[i].seen = time.Now()
				delete(pending, k)
			}
			mu.Unlock()
		}
	})
	err = b.profile(profile, func() error {
		var calls sync.WaitGroup
		defer calls.Wait()
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for time.Since(run.start) < d {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-tick.C:
			}
			name, want := pick()
			mu.Lock()
			i := len(run.trace)
			run.trace = append(run.trace, changeTimes{name: name, made: time.Now()})
			pending[key{name, !want}] = i
			mu.Unlock()
			calls.Go(func() {
				if err := change(ctx, name, want); err != nil {
					b.log.WarnContext(ctx, "sustained_change_failed", "job", name, "error", err)
				}
				mu.Lock()
				run.trace[i].returned = time.Now()
				mu.Unlock()
			})
		}
		return nil
	})
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		left := len(pending)
		mu.Unlock()
		if left == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	run.cpu = c0.to(b.cpu.sample())
	stopWatching()
	w.Stop()
	watching.Wait()
	if werr := run.writeTrace(filepath.Join(b.outDir, profile+".csv")); err == nil {
		err = werr
	}
	return run, err
}

// updateFloor returns the change of a bare client-go update loop: each CronJob's suspend
// set on the loop's own copy of it (listed once before the run, then the object each
// update returned) and written back whole with Update, read again only after a Conflict
// (the CronJob controller wrote its status meanwhile).
func (b *bench) updateFloor(ctx context.Context, f *fleet, client kubernetes.Interface) (func(context.Context, string, bool) error, error) {
	cronJobs := client.BatchV1().CronJobs(f.ns)
	copies := map[string]*batchv1.CronJob{}
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := cronJobs.List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list cronjobs for the update floor: %w", err)
		}
		for i := range list.Items {
			copies[list.Items[i].Name] = &list.Items[i]
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			break
		}
	}
	var mu sync.Mutex
	return func(ctx context.Context, name string, want bool) error {
		mu.Lock()
		cj := copies[name].DeepCopy()
		mu.Unlock()
		for {
			suspend := !want
			cj.Spec.Suspend = &suspend
			got, err := cronJobs.Update(ctx, cj, metav1.UpdateOptions{FieldManager: "bench-floor"})
			if apierrors.IsConflict(err) {
				if cj, err = cronJobs.Get(ctx, name, metav1.GetOptions{}); err != nil {
					return err
				}
				continue
			}
			if err != nil {
				return err
			}
			mu.Lock()
			copies[name] = got
			mu.Unlock()
			return nil
		}
	}, nil
}
