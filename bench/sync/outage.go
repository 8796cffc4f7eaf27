package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/datajobs/datajobs/bench/internal/stats"
	"github.com/datajobs/datajobs/internal/devenv"
	"github.com/datajobs/datajobs/internal/job"
)

// farTarget is the outage scenario's execution target in the second cluster.
const farTarget = "far"

// outageFleet is the outage scenario's set-up: a fleet whose second team is the default
// of a target in a second cluster, and one serve process driving both.
type outageFleet struct {
	*fleet
	cluster2      *devenv.Env
	far           kubernetes.Interface
	farNS         string
	near, farJobs []string // the jobs of the default target and of the far one
	enabled       map[string]bool
	next          int // the changes made so far
}

// outage measures a target in another cluster whose apiserver stops (issue 44): the
// latency of sequential changes of the default target (PATCH enabled → suspend seen by a
// watch, as latency does) with `datajobs serve` running, for a while with the second
// cluster up and for as long with its apiserver stopped; each change of the default target
// is followed by one of the far target, so both runs make the same writes. Then the time
// the far target takes to catch up on the changes made to it during the outage, once its
// apiserver is back.
func (b *bench) outage(ctx context.Context, n int, lasting time.Duration) error {
	b.printf("## outage (%d jobs in the default target, %d in a target of a second cluster; one `%s serve`; changes for %s with the second cluster up, then for %s with its apiserver stopped)\n\n",
		n, n, b.datajobs, lasting, lasting)
	o, stop, err := b.outageSetup(ctx, n)
	if err != nil {
		return err
	}
	defer stop()
	s, err := b.serve(ctx, o.fleet, "outage", nil)
	if err != nil {
		return err
	}
	defer s.stop()
	if err := poll(ctx, 200*time.Millisecond, time.Duration(2*n)*20*time.Millisecond+5*time.Minute, "both targets converged", func() (bool, error) {
		var applied int
		err := o.conn.QueryRow(ctx, `SELECT count(*) FROM actual_data_job_deployment`).Scan(&applied)
		return err == nil && applied == 2*n, err
	}); err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	seen, err := b.watchSuspend(runCtx, &wg, o.ns)
	if err != nil {
		return err
	}
	up, upFar, err := o.changes(ctx, b, seen, lasting)
	if err != nil {
		return fmt.Errorf("with the second cluster up: %w", err)
	}
	upCaught, err := o.farCaughtUp(ctx, time.Minute)
	if err != nil {
		return err
	}
	farBefore := o.next
	tDown := time.Now()
	if err := o.cluster2.APIServer.Stop(); err != nil {
		return fmt.Errorf("stop the second cluster's apiserver: %w", err)
	}
	tStopped := time.Now() // the apiserver's graceful stop takes a while: the outage starts once it is over
	down, downFar, err := o.changes(ctx, b, seen, lasting)
	if err != nil {
		return fmt.Errorf("with the second cluster's apiserver stopped: %w", err)
	}
	tStart := time.Now()
	if err := o.cluster2.APIServer.Start(ctx); err != nil {
		return fmt.Errorf("start the second cluster's apiserver again: %w", err)
	}
	tUp := time.Now()
	caught, err := o.farCaughtUp(ctx, 5*time.Minute)
	if err != nil {
		return err
	}
	pu, pd := stats.Percentiles(up, 50, 90, 99, 100), stats.Percentiles(down, 50, 90, 99, 100)
	b.printf("| PATCH enabled → suspend seen by a watch (default target) | changes | p50 | p90 | p99 | max |\n|---|---|---|---|---|---|\n")
	b.printf("| second cluster up | %d | %s | %s | %s | %s |\n", len(up), ms(pu[0]), ms(pu[1]), ms(pu[2]), ms(pu[3]))
	b.printf("| second cluster's apiserver stopped (%s; its stop took %s more) | %d | %s | %s | %s | %s |\n",
		secs(tStart.Sub(tStopped)), secs(tStopped.Sub(tDown)), len(down), ms(pd[0]), ms(pd[1]), ms(pd[2]), ms(pd[3]))
	b.printf("\np50 %.2fx, p99 %.2fx the run without the outage.\n\n", float64(pd[0])/float64(pu[0]), float64(pd[2])/float64(pu[2]))
	fu, fd := stats.Percentiles(upFar, 50, 99, 100), stats.Percentiles(downFar, 50, 99, 100)
	b.printf("The far target's change after each (the service call, not awaited): p50 %s, p99 %s, max %s with its cluster up; p50 %s, p99 %s, max %s with its apiserver stopped.\n\n",
		ms(fu[0]), ms(fu[1]), ms(fu[2]), ms(fd[0]), ms(fd[1]), ms(fd[2]))
	b.printf("The far target: its %d changes of the run without the outage were all in its cluster %s after that run; "+
		"its %d changes made during the outage were all in its cluster %s after its apiserver was started again "+
		"(%s after the start began; the apiserver's start took %s).\n\n",
		farBefore, secs(upCaught), o.next-farBefore, secs(caught), secs(caught+tUp.Sub(tStart)), secs(tUp.Sub(tStart)))
	return nil
}

// outageSetup starts the second cluster, makes the fleet with the far target (its
// kubeconfig in a Secret of the default target's namespace) and n deployed jobs in each
// target, and returns what removes it all.
func (b *bench) outageSetup(ctx context.Context, n int) (*outageFleet, func(), error) {
	cluster2, stop2, err := secondCluster(ctx)
	if err != nil {
		return nil, nil, err
	}
	f, err := newFleet(ctx, b, false)
	if err != nil {
		stop2()
		return nil, nil, err
	}
	o := &outageFleet{fleet: f, cluster2: cluster2, farNS: "far-" + f.ns, near: jobNames(n), farJobs: secondJobNames(n), enabled: map[string]bool{}}
	stop := func() { f.drop(); stop2() }
	if err := o.farTarget(ctx, b); err != nil {
		stop()
		return nil, nil, err
	}
	for owner, names := range map[string][]string{team: o.near, secondTeam: o.farJobs} {
		err := f.createTeamJobs(ctx, owner, names, 8)
		if err == nil {
			err = f.deployTeamJobs(ctx, owner, names, 8)
		}
		if err != nil {
			stop()
			return nil, nil, err
		}
		for _, name := range names {
			o.enabled[name] = true
		}
	}
	return o, stop, nil
}

// farTarget makes the far target: its namespace in the second cluster, the Secret of its
// kubeconfig and its row.
func (o *outageFleet) farTarget(ctx context.Context, b *bench) error {
	rc, err := o.cluster2.RestConfig()
	if err != nil {
		return err
	}
	if o.far, err = kubernetes.NewForConfig(rc); err != nil {
		return err
	}
	if _, err := o.far.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.farNS}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the far namespace: %w", err)
	}
	config, err := os.ReadFile(o.cluster2.Kubeconfig)
	if err != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cluster2-kubeconfig"}, Data: map[string][]byte{"kubeconfig": config}}
	if _, err := b.admin.CoreV1().Secrets(o.ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the kubeconfig Secret: %w", err)
	}
	_, err = o.db.PutTarget(ctx, job.Target{Name: farTarget, Namespace: o.farNS, KubeconfigSecret: secret.Name, DefaultFor: []string{secondTeam}})
	return err
}

// changes makes changes for lasting, one after the other: each flips the enabled flag of
// a job of the default target and waits until the watch shows its CronJob's suspend
// flipped, then flips that of a job of the far target without waiting, and pauses
// -latency-gap. It returns the default target's latencies and the far target's service
// calls' durations.
func (o *outageFleet) changes(ctx context.Context, b *bench, seen <-chan observation, lasting time.Duration) (out, farCalls []time.Duration, err error) {
	for end := time.Now().Add(lasting); time.Now().Before(end); o.next++ {
		name := o.near[o.next%len(o.near)]
		want := !o.enabled[name]
		t0 := time.Now()
		if _, err := o.svc.PatchDeployment(ctx, team, name, job.DeploymentChange{Enabled: &want}, "bench"); err != nil {
			return out, farCalls, err
		}
		at, err := awaitSuspend(ctx, seen, name, !want)
		if err != nil {
			return out, farCalls, fmt.Errorf("change %d (%s enabled=%v): %w", o.next, name, want, err)
		}
		out = append(out, at.Sub(t0))
		o.enabled[name] = want
		far := o.farJobs[o.next%len(o.farJobs)]
		farWant := !o.enabled[far]
		t1 := time.Now()
		if _, err := o.svc.PatchDeployment(ctx, secondTeam, far, job.DeploymentChange{Enabled: &farWant}, "bench"); err != nil {
			return out, farCalls, err
		}
		farCalls = append(farCalls, time.Since(t1))
		o.enabled[far] = farWant
		time.Sleep(b.latencyGap)
	}
	return out, farCalls, nil
}

// farCaughtUp waits until every CronJob of the far target is suspended as its job is
// disabled, and returns how long that took.
func (o *outageFleet) farCaughtUp(ctx context.Context, timeout time.Duration) (time.Duration, error) {
	t0 := time.Now()
	err := poll(ctx, 100*time.Millisecond, timeout, "the far target caught up", func() (bool, error) {
		right := 0
		err := eachCronJob(ctx, o.far, o.farNS, func(cj *batchv1.CronJob) {
			if cj.Spec.Suspend != nil && *cj.Spec.Suspend == !o.enabled[cj.Name] {
				right++
			}
		})
		return err == nil && right == len(o.farJobs), err
	})
	return time.Since(t0), err
}

// secondCluster starts a second Kubernetes control plane (etcd and kube-apiserver, no
// controllers and no node) on loopback, as testenv.SecondCluster does for the tests, and
// returns what stops it and removes its state.
func secondCluster(ctx context.Context) (*devenv.Env, func(), error) {
	root, err := devenv.RepoRoot()
	if err != nil {
		return nil, nil, err
	}
	cfg := devenv.Config{Kubernetes: true, Fast: true, NoPostgres: true}
	if cfg.BinDir, err = devenv.EnsureBinaries(ctx, root, os.Stderr); err != nil {
		return nil, nil, err
	}
	if cfg.StateDir, err = os.MkdirTemp("", "bench-sync-cluster2-"); err != nil {
		return nil, nil, err
	}
	env, err := devenv.Start(ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("start the second cluster (logs in %s/logs): %w", cfg.StateDir, err)
	}
	return env, func() {
		if err := env.Stop(); err == nil {
			_ = os.RemoveAll(cfg.StateDir)
		}
	}, nil
}
