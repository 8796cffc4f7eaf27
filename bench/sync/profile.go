package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	batchv1ac "k8s.io/client-go/applyconfigurations/batch/v1"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/synchronizer"
)

// The profile scenario (issue 43, docs/profiles.md): n jobs deployed selecting one
// execution profile and converged; then two PUTs of the profile that change what it
// renders (an environment variable of the job container), each timed from the PUT's
// return (its transaction has committed) until a watch has seen every CronJob carry the
// change, with a synchronizer running live at the service's defaults. The first change
// is each CronJob's first since the converge created it plainly (a backlog: the change
// hands its fields over to the apply manager, then applies); the second is an apply
// alone. The floor, in the same run after the synchronizer stopped, is the same n
// CronJob changes sent by a bare client-go loop as the synchronizer sends them (a
// server-side apply each); the plain-create floor is measured beside it.

const (
	benchProfile = "bench-profile"
	// profileEnv is the profile's environment variable; its value is the profile's stage.
	profileEnv = "BENCH_STAGE"
)

// benchProfileSpec is the benchmark's profile at a stage: granted to the benchmark's team,
// adding one environment variable.
func benchProfileSpec(stage string) job.Profile {
	return job.Profile{
		Name: benchProfile, Description: "bench/sync profile scenario", Teams: []string{team},
		Env: []job.ProfileEnvVar{{Name: profileEnv, Value: stage}},
	}
}

// stageOf is the profile stage a CronJob's pods get (empty: none).
func stageOf(cj *batchv1.CronJob) string {
	for _, c := range cj.Spec.JobTemplate.Spec.Template.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == profileEnv {
				return e.Value
			}
		}
	}
	return ""
}

// profileChange is one timed PUT of the profile.
type profileChange struct {
	what string
	// put is the service call (validation, the transaction, the profile read back); seen
	// runs from its return until every CronJob carried the change; recorded until every
	// deployment was recorded synced at its new generation.
	put, seen, recorded time.Duration
	writes, reads       int64 // the synchronizer's Kubernetes requests meanwhile
	cpu                 cpuReport
}

// profileRunResult is one run: its changes and the floors.
type profileRunResult struct {
	changes                []profileChange
	applyFloor, plainFloor time.Duration
	applyCPU, plainCPU     cpuReport
}

// profileScenario runs the profile scenario runs times, each on a fleet of its own.
func (b *bench) profileScenario(ctx context.Context, n, runs int) error {
	b.printf("## execution profile change (%d deployments of one profile, synchronizer live at its defaults)\n\n", n)
	b.printf("| run | change | PUT (the service call) | PUT returned → every CronJob changed (watch) | → all recorded synced | "+
		"floor: the %d changes by bare server-side apply | ratio | CPU ratio | plain-create floor | ratio to it | synchronizer's Kubernetes writes / reads |\n", n)
	b.printf("|---|---|---|---|---|---|---|---|---|---|---|\n")
	var cpuLines []string
	for r := range runs {
		res, err := b.profileRun(ctx, n, r)
		if err != nil {
			return err
		}
		for _, c := range res.changes {
			b.printf("| %d | %s | %s | %s | %s | %s | %.2fx | %.2fx | %s | %.2fx | %d / %d |\n", r+1, c.what, ms(c.put), secs(c.seen), secs(c.recorded),
				secs(res.applyFloor), c.seen.Seconds()/res.applyFloor.Seconds(), c.cpu.ours()/res.applyCPU.ours(),
				secs(res.plainFloor), c.seen.Seconds()/res.plainFloor.Seconds(), c.writes, c.reads)
			cpuLines = append(cpuLines, fmt.Sprintf("- run %d, %s: %s", r+1, c.what, c.cpu))
		}
		cpuLines = append(cpuLines, fmt.Sprintf("- run %d, floor (bare server-side apply): %s", r+1, res.applyCPU),
			fmt.Sprintf("- run %d, plain-create floor: %s", r+1, res.plainCPU))
	}
	b.printf("\nThe apply floor is timed as the changes are, until a watch has seen every CronJob carry it; the plain-create floor " +
		"(the same CronJobs created in a namespace of their own) until its last create returned.\n")
	b.printf("\nEach PUT's transaction locked the %d jobs, bumped their generations and wrote %d revisions of kind %q "+
		"(counted after each change; the scenario fails otherwise). CPU seconds per process group during each phase:\n\n", n, n, job.RevisionProfile)
	for _, l := range cpuLines {
		b.printf("%s\n", l)
	}
	b.printf("\n")
	return nil
}

// profileRun deploys n jobs of the benchmark's profile, converges them, changes the
// profile twice with a synchronizer live, and measures the floors.
func (b *bench) profileRun(ctx context.Context, n, run int) (profileRunResult, error) {
	var res profileRunResult
	f, err := newFleet(ctx, b, true)
	if err != nil {
		return res, err
	}
	defer f.drop()
	if _, err := f.svc.PutProfile(ctx, benchProfileSpec("v1")); err != nil {
		return res, fmt.Errorf("create the profile: %w", err)
	}
	f.profile = benchProfile
	names := jobNames(n)
	if err := f.createJobs(ctx, names, 8); err != nil {
		return res, fmt.Errorf("create jobs: %w", err)
	}
	if err := f.deployJobs(ctx, names, 8); err != nil {
		return res, fmt.Errorf("deploy jobs: %w", err)
	}
	if _, _, err := b.syncConverge(ctx, f, n, fmt.Sprintf("profile-setup-run%d", run+1)); err != nil {
		return res, fmt.Errorf("converge: %w", err)
	}
	if res.changes, err = b.profileChanges(ctx, f, run); err != nil {
		return res, err
	}
	// The floors write the CronJobs themselves: the synchronizer has stopped.
	objs, err := f.renderedWith(ctx, func(d *job.Deployment) {
		p := benchProfileSpec("v4")
		d.Profile = &p
	})
	if err != nil {
		return res, err
	}
	if res.applyFloor, res.applyCPU, err = b.applyFloor(ctx, f.ns, objs, "v4"); err != nil {
		return res, fmt.Errorf("apply floor: %w", err)
	}
	if err := b.checkStage(ctx, f.ns, n, "v4"); err != nil {
		return res, fmt.Errorf("apply floor: %w", err)
	}
	if res.plainFloor, res.plainCPU, err = b.failoverFloor(ctx, f); err != nil {
		return res, fmt.Errorf("plain-create floor: %w", err)
	}
	return res, nil
}

// awaitStage watches the CronJobs of ns from now on: the channel it returns receives the
// time when the watch has seen n of them carry the profile at stage. stop ends the watch.
func (b *bench) awaitStage(ctx context.Context, ns string, n int, stage string) (seen <-chan time.Time, stop func(), err error) {
	w, err := b.watchCronJobs(ctx, ns)
	if err != nil {
		return nil, nil, err
	}
	all := make(chan time.Time, 1)
	go func() {
		carrying := map[string]bool{}
		for ev := range w.ResultChan() { // until stop, if not all are seen
			if cj, ok := ev.Object.(*batchv1.CronJob); ok && stageOf(cj) == stage && !carrying[cj.Name] {
				if carrying[cj.Name] = true; len(carrying) == n {
					all <- time.Now()
					return
				}
			}
		}
	}()
	return all, w.Stop, nil
}

// seenBy waits for seen, at most long enough for n CronJobs to change.
func seenBy(ctx context.Context, seen <-chan time.Time, n int, stage string) (time.Time, error) {
	select {
	case at := <-seen:
		return at, nil
	case <-time.After(max(2*time.Minute, time.Duration(n)*20*time.Millisecond)):
		return time.Time{}, fmt.Errorf("not every CronJob carried %s=%s in time", profileEnv, stage)
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
}

// profileChanges runs a synchronizer live on the converged fleet, waits until it is idle
// and makes the two timed changes of the profile.
func (b *bench) profileChanges(ctx context.Context, f *fleet, run int) ([]profileChange, error) {
	counter := &requestCounter{}
	cs, err := b.clientset(ctx, counter)
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(b.outDir, fmt.Sprintf("profile-run%d.log", run+1)))
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	reg := prometheus.NewRegistry()
	obs := newObservedStore(f.db, 0)
	s := b.syncer(f, obs, cs, 0, slog.New(slog.NewJSONHandler(logFile, nil)), synchronizer.NewMetrics(reg))
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var runErr error
	wg.Go(func() { runErr = s.Run(runCtx, f.epoch) })
	defer wg.Wait()
	defer cancel()
	if _, err := waitIdle(ctx, reg, obs, 0); err != nil {
		return nil, err
	}
	var out []profileChange
	for i, c := range []struct{ what, stage string }{
		{"first (CronJobs created plainly by the converge)", "v2"},
		{"second (an apply each)", "v3"},
	} {
		pc, err := b.profileChange(ctx, f, counter, c.stage, i+1, fmt.Sprintf("profile-run%d-%s", run+1, c.stage))
		if err != nil {
			return nil, fmt.Errorf("%s change: %w", c.what, err)
		}
		pc.what = c.what
		out = append(out, pc)
	}
	cancel()
	wg.Wait()
	if runErr != nil {
		return nil, fmt.Errorf("synchronizer: %w", runErr)
	}
	return out, nil
}

// profileChange PUTs the profile at stage (its nth change) and times it until a watch
// has seen every CronJob of the fleet carry the stage, then until every deployment is
// recorded synced; it checks that every job got its nth revision of kind profile.
func (b *bench) profileChange(ctx context.Context, f *fleet, counter *requestCounter, stage string, nth int, name string) (profileChange, error) {
	var pc profileChange
	n := len(f.names)
	allSeen, stop, err := b.awaitStage(ctx, f.ns, n, stage)
	if err != nil {
		return pc, err
	}
	defer stop()
	writes0, reads0 := counter.writes.Load(), counter.reads.Load()
	c0 := b.cpu.sample()
	var returned time.Time
	err = b.profile(name, func() error {
		t0 := time.Now()
		ch, err := f.svc.PutProfile(ctx, benchProfileSpec(stage))
		returned = time.Now()
		pc.put = returned.Sub(t0)
		if err != nil {
			return fmt.Errorf("put profile: %w", err)
		}
		if len(ch.Rerendered) != n {
			return fmt.Errorf("the PUT re-rendered %d jobs, want %d", len(ch.Rerendered), n)
		}
		at, err := seenBy(ctx, allSeen, n, stage)
		pc.seen = at.Sub(returned)
		return err
	})
	pc.cpu = c0.to(b.cpu.sample())
	pc.writes, pc.reads = counter.writes.Load()-writes0, counter.reads.Load()-reads0
	if err != nil {
		return pc, err
	}
	err = poll(ctx, 20*time.Millisecond, time.Minute, "every deployment recorded synced", func() (bool, error) {
		synced, err := f.syncedCount(ctx)
		return synced == n, err
	})
	if err != nil {
		return pc, err
	}
	pc.recorded = time.Since(returned)
	return pc, f.checkProfileRevisions(ctx, n, nth)
}

// checkProfileRevisions checks that each of the n jobs has exactly nth revisions of kind
// profile, one per change of the profile so far.
func (f *fleet) checkProfileRevisions(ctx context.Context, n, nth int) error {
	var total, jobs int
	err := f.conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE per_job = $2) FROM (
	SELECT count(*) AS per_job FROM data_job_revision WHERE kind = $1 GROUP BY job_uid) r`, job.RevisionProfile, nth).Scan(&total, &jobs)
	if err != nil {
		return fmt.Errorf("count profile revisions: %w", err)
	}
	if total != n || jobs != n {
		return fmt.Errorf("%d jobs have revisions of kind %s, %d of them %d; want all %d", total, job.RevisionProfile, jobs, nth, n)
	}
	return nil
}

// checkStage checks that the namespace's n CronJobs all carry the profile's stage.
func (b *bench) checkStage(ctx context.Context, ns string, n int, stage string) error {
	l, err := b.admin.BatchV1().CronJobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list cronjobs: %w", err)
	}
	carrying := 0
	for i := range l.Items {
		if stageOf(&l.Items[i]) == stage {
			carrying++
		}
	}
	if carrying != n || len(l.Items) != n {
		return fmt.Errorf("%d of %d CronJobs carry %s=%s, want %d", carrying, len(l.Items), profileEnv, stage, n)
	}
	return nil
}

// applyFloor is the floor of a change of existing CronJobs: a bare client-go loop that
// sends each rendered CronJob (carrying the profile at stage) as the synchronizer's apply
// does (server-side apply by its field manager, with force and fieldValidation Ignore),
// b.workers at a time, with the synchronizer's client limits, and without the
// synchronizer's reads, hand-over or resourceVersion precondition. It is timed as the
// synchronizer is: until a watch has seen every CronJob carry the stage.
func (b *bench) applyFloor(ctx context.Context, ns string, objs []*batchv1.CronJob, stage string) (time.Duration, cpuReport, error) {
	cs, err := b.clientset(ctx, nil)
	if err != nil {
		return 0, cpuReport{}, err
	}
	seen, stop, err := b.awaitStage(ctx, ns, len(objs), stage)
	if err != nil {
		return 0, cpuReport{}, err
	}
	defer stop()
	force := true
	c0 := b.cpu.sample()
	start := time.Now()
	err = parallel(ctx, objs, b.workers, func(ctx context.Context, cj *batchv1.CronJob) error {
		body, err := applyBody(cj)
		if err != nil {
			return err
		}
		_, err = cs.BatchV1().CronJobs(ns).Patch(ctx, cj.Name, types.ApplyPatchType, body, metav1.PatchOptions{
			FieldManager: kube.FieldManager, Force: &force, FieldValidation: metav1.FieldValidationIgnore,
		})
		return err
	})
	if err != nil {
		return 0, cpuReport{}, err
	}
	at, err := seenBy(ctx, seen, len(objs), stage)
	return at.Sub(start), c0.to(b.cpu.sample()), err
}

// applyBody is the body of a server-side apply of cj: its apply configuration (only the
// fields it sets, no status), as client-go's typed Apply would send it.
func applyBody(cj *batchv1.CronJob) ([]byte, error) {
	raw, err := json.Marshal(cj)
	if err != nil {
		return nil, fmt.Errorf("marshal cronjob %s: %w", cj.Name, err)
	}
	ac := &batchv1ac.CronJobApplyConfiguration{}
	if err := json.Unmarshal(raw, ac); err != nil {
		return nil, fmt.Errorf("apply configuration of cronjob %s: %w", cj.Name, err)
	}
	ac.Status = nil
	return json.Marshal(ac.WithAPIVersion("batch/v1").WithKind("CronJob"))
}
