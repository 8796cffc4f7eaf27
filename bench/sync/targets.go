package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/store"
)

// secondTeam owns the jobs of the second execution target in the targets and outage
// scenarios; the benchmark's team stays the default target's.
const secondTeam = "bench-b"

// secondJobNames are the names of n jobs of secondTeam (a job's name is unique across teams).
func secondJobNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("bench-b-job-%06d", i)
	}
	return names
}

// servedConverge is what convergeServed measured.
type servedConverge struct {
	written, applied time.Duration
	rss, hwm, anon   []uint64 // VmRSS, VmHWM, RssAnon
	live             []uint64 // the Go heap in use after a forced GC
	rows             []string
}

// targets measures execution targets (issue 44): n jobs split over two teams, each the
// default of one target (the default one and a second in another namespace of the same
// cluster), converged by two `datajobs serve` replicas that split the two shards; then the
// same n jobs in one target converged by one replica; each replica's RSS after its
// converge; and the failover of the second target's shard with pending changes written
// while its leader was frozen.
func (b *bench) targets(ctx context.Context, n, pending int) error {
	pending = min(pending, n-n/2)
	b.printf("## targets (%d jobs: 2 targets × %d with 2 replicas, then 1 target × %d with 1 replica; failover of one shard with %d pending; `%s serve`, GOMEMLIMIT=%s)\n\n",
		n, n/2, n, pending, b.datajobs, goMemLimit)
	split, err := b.targetsSplit(ctx, n, pending)
	if err != nil {
		return err
	}
	single, err := b.targetsSingle(ctx, n)
	if err != nil {
		return err
	}
	b.printf("| measure | 2 targets, 2 replicas | 1 target, 1 replica | ratio |\n|---|---|---|---|\n")
	b.printf("| %d deployments written (service, 2×8 at a time) | %s | %s | %.2fx |\n", n, secs(split.written), secs(single.written), split.written.Seconds()/single.written.Seconds())
	b.printf("| converge: deployments written and all applied (CronJobs created) | %s | %s | %.2fx |\n", secs(split.applied), secs(single.applied), split.applied.Seconds()/single.applied.Seconds())
	for i, who := range []string{"replica leading the default target", "replica leading the second target"} {
		b.printf("| VmRSS 5 s after converge, %s | %s | %s | %.2fx |\n", who, mib(split.rss[i]), mib(single.rss[0]), float64(split.rss[i])/float64(single.rss[0]))
		b.printf("| VmHWM (peak), %s | %s | %s | %.2fx |\n", who, mib(split.hwm[i]), mib(single.hwm[0]), float64(split.hwm[i])/float64(single.hwm[0]))
		b.printf("| RssAnon (VmRSS less the binary's pages), %s | %s | %s | %.2fx |\n", who, mib(split.anon[i]), mib(single.anon[0]), float64(split.anon[i])/float64(single.anon[0]))
		b.printf("| Go heap in use after a GC, %s | %s | %s | %.2fx |\n", who, mib(split.live[i]), mib(single.live[0]), float64(split.live[i])/float64(single.live[0]))
	}
	b.printf("\n"+memoryHeader+"%s%s\n", strings.Join(split.rows, ""), strings.Join(single.rows, ""))
	return nil
}

// targetsSplit is the two-target, two-replica part of targets, with the shard failover.
func (b *bench) targetsSplit(ctx context.Context, n, pending int) (servedConverge, error) {
	var out servedConverge
	f, err := newFleet(ctx, b, false)
	if err != nil {
		return out, err
	}
	defer f.drop()
	ns2, dropNS2, err := b.namespace(ctx)
	if err != nil {
		return out, err
	}
	defer dropNS2()
	second := job.Target{Name: "second", Namespace: ns2, DefaultFor: []string{secondTeam}}
	if _, err := f.db.PutTarget(ctx, second); err != nil {
		return out, fmt.Errorf("put target: %w", err)
	}
	jobs := map[string][]string{team: jobNames(n / 2), secondTeam: secondJobNames(n - n/2)}
	for owner, names := range jobs {
		if err := f.createTeamJobs(ctx, owner, names, 8); err != nil {
			return out, err
		}
	}
	env := []string{"GOMEMLIMIT=" + goMemLimit}
	t0 := time.Now()
	replicas := make([]*server, 2)
	for i, name := range []string{"targets-a", "targets-b"} {
		if replicas[i], err = b.serve(ctx, f, name, env); err != nil {
			return out, err
		}
		defer replicas[i].stop()
	}
	shardLease := store.ShardLeaseName(second.Name)
	var byShard []*server // the leader of the default target's shard, then the second's
	if err := poll(ctx, 100*time.Millisecond, 2*time.Minute, "each replica leads one shard", func() (bool, error) {
		first, err1 := leaseLeader(ctx, f, store.SyncLeaseName, replicas)
		other, err2 := leaseLeader(ctx, f, shardLease, replicas)
		byShard = []*server{first, other}
		return first != nil && other != nil && first != other, errors.Join(err1, err2)
	}); err != nil {
		return out, err
	}
	b.printf("The two replicas split the shards %s after their start: %s leads the default target (%s), %s the second (%s).\n\n",
		secs(time.Since(t0)), byShard[0].name, f.ns, byShard[1].name, ns2)
	if out, err = b.convergeServed(ctx, f, jobs, byShard); err != nil {
		return out, err
	}
	for ns, want := range map[string]int{f.ns: n / 2, ns2: n - n/2} {
		if err := wantCronJobs(ctx, b, ns, want); err != nil {
			return out, err
		}
	}
	return out, b.shardFailover(ctx, f, second, byShard, jobs[secondTeam][:pending])
}

// targetsSingle is the one-target, one-replica part of targets.
func (b *bench) targetsSingle(ctx context.Context, n int) (servedConverge, error) {
	f, err := newFleet(ctx, b, false)
	if err != nil {
		return servedConverge{}, err
	}
	defer f.drop()
	jobs := map[string][]string{team: jobNames(n)}
	if err := f.createJobs(ctx, jobs[team], 8); err != nil {
		return servedConverge{}, err
	}
	s, err := b.serve(ctx, f, "targets-single", []string{"GOMEMLIMIT=" + goMemLimit})
	if err != nil {
		return servedConverge{}, err
	}
	defer s.stop()
	if err := poll(ctx, 100*time.Millisecond, 2*time.Minute, "the replica leads", func() (bool, error) {
		l, err := leaseLeader(ctx, f, store.SyncLeaseName, []*server{s})
		return l != nil, err
	}); err != nil {
		return servedConverge{}, err
	}
	out, err := b.convergeServed(ctx, f, jobs, []*server{s})
	if err != nil {
		return out, err
	}
	return out, wantCronJobs(ctx, b, f.ns, n)
}

// convergeServed deploys every job of jobs (by team; the teams at once, 8 at a time each)
// through the service while the serve processes run, and times until every deployment is
// applied (its actual row written once its CronJob is created); then, 5 s later, reads
// each process's memory.
func (b *bench) convergeServed(ctx context.Context, f *fleet, jobs map[string][]string, servers []*server) (servedConverge, error) {
	var out servedConverge
	total := 0
	t0 := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, 0, len(jobs))
	var mu sync.Mutex
	for owner, names := range jobs {
		total += len(names)
		wg.Go(func() {
			err := f.deployTeamJobs(ctx, owner, names, 8)
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return out, fmt.Errorf("deploy: %w", err)
	}
	out.written = time.Since(t0)
	if err := poll(ctx, 200*time.Millisecond, time.Duration(total)*20*time.Millisecond+5*time.Minute, fmt.Sprintf("%d deployments applied", total), func() (bool, error) {
		var applied int
		err := f.conn.QueryRow(ctx, `SELECT count(*) FROM actual_data_job_deployment`).Scan(&applied)
		return err == nil && applied >= total, err
	}); err != nil {
		return out, err
	}
	out.applied = time.Since(t0)
	time.Sleep(5 * time.Second)
	for _, s := range servers {
		rss, _ := procStatus(s.cmd.Process.Pid, "VmRSS")
		hwm, _ := procStatus(s.cmd.Process.Pid, "VmHWM")
		anon, _ := procStatus(s.cmd.Process.Pid, "RssAnon")
		out.rss, out.hwm, out.anon = append(out.rss, rss), append(out.hwm, hwm), append(out.anon, anon)
		out.rows = append(out.rows, memoryRow(ctx, s, "5 s after converge"))
		live, err := b.liveHeap(ctx, s)
		if err != nil {
			return out, err
		}
		out.live = append(out.live, live)
	}
	return out, nil
}

// shardFailover freezes (SIGSTOP) the replica leading target's shard, disables the
// deployments of names (target's) through the service, kills the frozen replica (SIGKILL)
// and times the survivor's takeover of the shard and its apply of every change.
func (b *bench) shardFailover(ctx context.Context, f *fleet, target job.Target, byShard []*server, names []string) error {
	lease := store.ShardLeaseName(target.Name)
	survivor, victim := byShard[0], byShard[1]
	_, epoch0, _, err := f.db.LeaseHolder(ctx, lease)
	if err != nil {
		return err
	}
	tStop := time.Now()
	if err := victim.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	_, _, expires, err := f.db.LeaseHolder(ctx, lease)
	if err != nil {
		return err
	}
	disabled := false
	if err := parallel(ctx, names, 8, func(ctx context.Context, name string) error {
		_, err := f.svc.PatchDeployment(ctx, secondTeam, name, job.DeploymentChange{Enabled: &disabled}, "bench")
		return err
	}); err != nil {
		return fmt.Errorf("disable deployments: %w", err)
	}
	tWritten := time.Now()
	if err := victim.cmd.Process.Kill(); err != nil {
		return err
	}
	tKill := time.Now()
	<-victim.exited
	var tLead, tApplied time.Time
	var epoch1 int64
	if err := poll(ctx, 10*time.Millisecond, 2*time.Minute, "the survivor leads the shard", func() (bool, error) {
		holder, epoch, exp, err := f.db.LeaseHolder(ctx, lease)
		if err == nil && survivor.holds(holder) && epoch > epoch0 && exp.After(time.Now()) {
			tLead, epoch1 = time.Now(), epoch
			return true, nil
		}
		return false, err
	}); err != nil {
		return err
	}
	if err := poll(ctx, 50*time.Millisecond, 5*time.Minute, fmt.Sprintf("%d changes applied", len(names)), func() (bool, error) {
		var applied int
		err := f.conn.QueryRow(ctx, `SELECT count(*) FROM data_job j
JOIN actual_data_job_deployment a ON a.data_job_name = j.name AND a.job_uid = j.uid AND a.generation = j.generation
WHERE j.name = ANY($1)`, names).Scan(&applied)
		tApplied = time.Now()
		return err == nil && applied == len(names), err
	}); err != nil {
		return err
	}
	suspended, err := countSuspended(ctx, b, target.Namespace)
	if err != nil {
		return err
	}
	if suspended != len(names) {
		return fmt.Errorf("%d suspended CronJobs in %s after failover, want %d", suspended, target.Namespace, len(names))
	}
	holder, _, _, err := f.db.LeaseHolder(ctx, store.SyncLeaseName)
	if err != nil {
		return err
	}
	if !survivor.holds(holder) {
		return fmt.Errorf("the survivor no longer leads the default target (holder %q)", holder)
	}
	since := func(t time.Time) string { return secs(t.Sub(tStop)) }
	b.printf("Failover of the second target's shard, whose leader %s (leading only it) is frozen while %d of its deployments are disabled:\n\n", victim.name, len(names))
	b.printf("| event | time since the shard's leader froze (SIGSTOP) |\n|---|---|\n")
	b.printf("| %d changes written (service, 8 at a time) | %s |\n", len(names), since(tWritten))
	b.printf("| shard's leader killed (SIGKILL) | %s |\n", since(tKill))
	b.printf("| frozen leader's shard lease expired (its expires_at) | %s |\n", since(expires))
	b.printf("| %s took the shard's lease (epoch %d → %d), still leading the default target | %s |\n", survivor.name, epoch0, epoch1, since(tLead))
	b.printf("| all %d changes applied (CronJobs suspended, rows recorded) | %s |\n", len(names), since(tApplied))
	b.printf("\nLease part %s after the kill; apply part %s (%.0f changes/s).\n\n",
		secs(tLead.Sub(tKill)), secs(tApplied.Sub(tLead)), float64(len(names))/tApplied.Sub(tLead).Seconds())
	return nil
}

// liveHeap is s's Go heap in use right after a GC (forced by the heap profile it saves
// as <name>.heap in the output folder, to compare the configurations by function).
func (b *bench) liveHeap(ctx context.Context, s *server) (uint64, error) {
	if err := b.saveHeap(ctx, s, filepath.Join(b.outDir, s.name+".heap")); err != nil {
		return 0, err
	}
	m, err := s.get(ctx, "/metrics")
	return uint64(metricSum(m, "go_memstats_heap_inuse_bytes")), err
}

// leaseLeader is the server among servers that holds the live lease name, nil when none.
func leaseLeader(ctx context.Context, f *fleet, name string, servers []*server) (*server, error) {
	holder, _, expires, err := f.db.LeaseHolder(ctx, name)
	if err != nil || !expires.After(time.Now()) {
		return nil, err
	}
	for _, s := range servers {
		if s.holds(holder) {
			return s, nil
		}
	}
	return nil, nil
}

// wantCronJobs fails unless ns holds want CronJobs.
func wantCronJobs(ctx context.Context, b *bench, ns string, want int) error {
	got, err := countCronJobs(ctx, b.admin, ns)
	if err == nil && got != want {
		err = fmt.Errorf("%d CronJobs in %s after converge, want %d", got, ns, want)
	}
	return err
}

// countSuspended counts the CronJobs of ns whose suspend is set.
func countSuspended(ctx context.Context, b *bench, ns string) (int, error) {
	n := 0
	err := eachCronJob(ctx, b.admin, ns, func(cj *batchv1.CronJob) {
		if cj.Spec.Suspend != nil && *cj.Spec.Suspend {
			n++
		}
	})
	return n, err
}
