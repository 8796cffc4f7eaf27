// Command sync benchmarks the datajobs synchronizer against a real PostgreSQL and a real
// kube-apiserver (the environment of `datajobs dev --env-only --fast`), all on loopback:
//
//   - converge: N new deployments from an empty namespace, next to a floor program that
//     creates the same CronJobs with plain client-go creates at the same concurrency and
//     client limits, in the same run;
//   - noop: a pass over N synced jobs, fresh and warm: Kubernetes and database writes,
//     time and allocations;
//   - memory: the Go heap an informer cache of N synced CronJobs holds, whole and with
//     kube.Trim (the leader's transform), and a synchronizer term's heap and RSS;
//   - sustained: N changes per second for a while (-rates, -sustain) through the service
//     with the synchronizer live, next to plain client-go patches at the same rate;
//   - latency: PATCH enabled through the service until the CronJob's suspend is seen
//     changed by a watch, with the synchronizer running live;
//   - leader: a real `datajobs serve` leader and a follower over the synced jobs (as the
//     chart runs them, GOMEMLIMIT), caught up and then with -running executions running:
//     their RSS, peak RSS, Go heap and a heap profile;
//   - failover: two `datajobs serve` processes; the leader is frozen, changes are written,
//     the leader is killed, and the follower's takeover and apply are timed, next to a
//     bare client-go loop creating the same CronJobs on the machine as busy (the floor);
//   - profile: -profile-n deployments of one execution profile, converged; two PUTs of the
//     profile that change what it renders, each timed until every CronJob carries it with
//     the synchronizer live, next to a bare client-go loop of server-side applies making
//     the same changes, and the plain-create floor (profile.go);
//   - targets: -targets-n jobs in two execution targets (two namespaces) converged by two
//     `datajobs serve` replicas that split the shards, against the same jobs in one target
//     with one replica: converge time and each replica's RSS; then the failover of one
//     shard with -failover-n changes pending (targets.go);
//   - outage: change latency of the default target with `datajobs serve` running, with a
//     target in a second cluster (a control plane the benchmark starts) up and then with
//     its apiserver stopped for -outage-for; then the far target's catch-up (outage.go).
//
// It reads DATAJOBS_TEST_DATABASE_URL and DATAJOBS_TEST_KUBECONFIG (or -env-file), creates
// its own databases and namespaces, removes them at the end, and stops after -timeout.
// bench/sync/run.sh starts the environment and runs it; docs/benchmarks.md has the results.
package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/datajobs/datajobs/internal/kube"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/sync:", err)
		os.Exit(1)
	}
}

// bench is one run of the benchmarks: the environment, the options and the report.
type bench struct {
	adminURL   string
	kubeconfig string
	rest       *rest.Config
	admin      kubernetes.Interface
	limits     limits
	workers    int
	outDir     string
	datajobs   string
	cpu        *cpuGroups
	log        *slog.Logger
	report     io.Writer
	// floorVariants are extra floor runs: "get", "get+watch".
	floorVariants []string
	// latencyGap is the pause of the latency scenario between a change seen and the next.
	latencyGap time.Duration
}

// options are the command line: which scenarios to run and their sizes.
type options struct {
	envFile, scenarios, sizes, limits, outDir, datajobs, compareBin, variants, rates              string
	repeat, repeatLarge, noopN, changes, latencyJobs, failoverN, profileN, workers, hogs, running int
	targetsN, outageN                                                                             int
	timeout, latencyGap, sustainFor, outageFor                                                    time.Duration
}

func parseOptions() options {
	var o options
	flag.StringVar(&o.envFile, "env-file", "", "file of DATAJOBS_TEST_DATABASE_URL= and DATAJOBS_TEST_KUBECONFIG= lines (default: the environment)")
	flag.StringVar(&o.scenarios, "scenarios", "converge,noop,latency,failover", "benchmarks to run, in this order")
	flag.StringVar(&o.sizes, "n", "1000,10000", "converge: numbers of deployments")
	flag.IntVar(&o.repeat, "repeat", 3, "converge: runs per size up to 1000")
	flag.IntVar(&o.repeatLarge, "repeat-large", 1, "converge: runs per size above 1000")
	flag.IntVar(&o.noopN, "noop-n", 10000, "noop, memory, sustained, leader and latency: number of synced jobs (reuses converge's last fleet when sizes match)")
	flag.IntVar(&o.changes, "changes", 200, "latency: number of changes")
	flag.IntVar(&o.latencyJobs, "latency-jobs", 0, "latency: number of jobs the changes cycle through (default: a different job for each change); 1 toggles one job back and forth, as a user would")
	flag.DurationVar(&o.latencyGap, "latency-gap", 10*time.Millisecond, "latency: pause between a change seen in the cluster and the next change (0: at once, as a script waiting for each change would)")
	flag.IntVar(&o.running, "running", 1000, "leader: executions made running")
	flag.StringVar(&o.compareBin, "compare-datajobs", "", "leader: another datajobs binary (say, of main) measured first on the same fleet, for a before/after")
	flag.IntVar(&o.failoverN, "failover-n", 1000, "failover: number of pending deployments; targets: number of pending changes of the shard failed over")
	flag.IntVar(&o.targetsN, "targets-n", 5000, "targets: number of jobs, half in each of the two targets")
	flag.IntVar(&o.outageN, "outage-n", 1000, "outage: number of jobs in each of the two targets")
	flag.DurationVar(&o.outageFor, "outage-for", time.Minute, "outage: how long the second cluster's apiserver is stopped, and the run without the outage lasts")
	flag.IntVar(&o.profileN, "profile-n", 1000, "profile: number of deployments of the profile (runs: -repeat)")
	flag.IntVar(&o.hogs, "hog", 0, "failover: busy processes (each a shell loop) run beside it from the freeze until all are applied, to measure a takeover on a busy machine")
	flag.IntVar(&o.workers, "workers", 16, "synchronizer workers, and the floor's concurrency (the service's default)")
	flag.StringVar(&o.limits, "kube-limits", "auto", `client QPS/burst of the synchronizer, the floor and the serve processes: "auto" (the service's default), "none", or QPS/burst such as 2000/4000`)
	flag.StringVar(&o.outDir, "out", "", "folder for logs and CPU profiles (default: a new temporary folder)")
	flag.StringVar(&o.datajobs, "datajobs", ".cache/bin/datajobs", "failover: the datajobs binary to serve with")
	flag.StringVar(&o.variants, "floor-variants", "", `converge: extra floor runs, comma-separated: "get" (a GET before each apply, as the synchronizer's create does), "get+watch" (and an informer on the namespace)`)
	flag.StringVar(&o.rates, "rates", "10,50,200", "sustained: changes per second, one run each")
	flag.DurationVar(&o.sustainFor, "sustain", 5*time.Minute, "sustained: how long each rate is driven")
	flag.DurationVar(&o.timeout, "timeout", 25*time.Minute, "stop everything after this long")
	flag.Parse()
	return o
}

func run() error {
	o := parseOptions()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	b, err := newBench(ctx, o)
	if err != nil {
		return err
	}
	resultsPath := filepath.Join(b.outDir, "results.md")
	results, err := os.Create(resultsPath)
	if err != nil {
		return err
	}
	defer results.Close()
	b.report = io.MultiWriter(os.Stdout, results)
	if err := b.runScenarios(ctx, o); err != nil {
		return err
	}
	b.printf("\nload average at end %s; results in %s\n", loadAverage(), resultsPath)
	return ctx.Err()
}

// newBench connects to the environment the options name and finds its processes.
func newBench(ctx context.Context, o options) (*bench, error) {
	if o.envFile != "" {
		if err := loadEnvFile(o.envFile); err != nil {
			return nil, err
		}
	}
	b := &bench{
		adminURL:   os.Getenv("DATAJOBS_TEST_DATABASE_URL"),
		kubeconfig: os.Getenv("DATAJOBS_TEST_KUBECONFIG"),
		workers:    o.workers,
		datajobs:   o.datajobs,
		log:        slog.New(slog.NewTextHandler(os.Stderr, nil)),
		latencyGap: o.latencyGap,
	}
	if b.adminURL == "" || b.kubeconfig == "" {
		return nil, errors.New("set DATAJOBS_TEST_DATABASE_URL and DATAJOBS_TEST_KUBECONFIG (from `datajobs dev --env-only --fast --env-file FILE`), or pass -env-file FILE")
	}
	var err error
	if o.variants != "" {
		b.floorVariants = strings.Split(o.variants, ",")
	}
	if b.limits, err = parseLimits(o.limits); err != nil {
		return nil, err
	}
	if b.outDir = o.outDir; b.outDir == "" {
		if b.outDir, err = os.MkdirTemp("", "bench-sync-"); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(b.outDir, 0o755); err != nil {
		return nil, err
	}
	if b.rest, err = restConfigFor(b.kubeconfig); err != nil {
		return nil, err
	}
	if b.admin, err = kubernetes.NewForConfig(b.rest); err != nil {
		return nil, err
	}
	u, err := url.Parse(b.adminURL)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	b.cpu = findEnvProcesses(filepath.Dir(b.kubeconfig), u.Port())
	if b.cpu.pgPID == 0 || len(b.cpu.pids["apiserver"]) == 0 {
		b.log.WarnContext(ctx, "environment_processes_not_found", "detail", "CPU per process will be incomplete")
	}
	return b, nil
}

// runScenarios runs the scenarios the options name, in order, after the report's header.
func (b *bench) runScenarios(ctx context.Context, o options) error {
	apf, err := kube.PriorityAndFairness(ctx, b.rest)
	if err != nil {
		return err
	}
	b.printf("# synchronizer benchmarks, %s\n\n", time.Now().UTC().Format(time.RFC3339))
	b.printf("machine: %d CPUs (%s), %s; load average at start %s; client QPS/burst %s (apiserver runs API Priority and Fairness: %v), %d workers; out %s\n\n",
		runtime.NumCPU(), cpuModel(), runtime.Version(), loadAverage(), b.limits, apf, b.workers, b.outDir)
	sizeList, err := parseInts(o.sizes)
	if err != nil {
		return err
	}
	rateList, err := parseInts(o.rates)
	if err != nil {
		return err
	}
	var kept *fleet // the last converge fleet, reused by noop and latency
	defer func() {
		if kept != nil {
			kept.drop()
		}
	}()
	for _, sc := range strings.Split(o.scenarios, ",") {
		if ctx.Err() != nil {
			break
		}
		b.log.InfoContext(ctx, "scenario_started", "scenario", sc)
		switch sc {
		case "converge":
			f, err := b.converge(ctx, sizeList, o.repeat, o.repeatLarge, o.noopN)
			if kept != nil && f != nil {
				kept.drop()
			}
			kept = cmp.Or(f, kept)
			if err != nil {
				return fmt.Errorf("converge: %w", err)
			}
		case "noop", "latency", "memory", "sustained", "leader":
			if kept == nil || len(kept.names) != o.noopN {
				if kept != nil {
					kept.drop()
					kept = nil
				}
				if kept, err = b.syncedFleet(ctx, o.noopN); err != nil {
					return fmt.Errorf("%s: %w", sc, err)
				}
			}
			if err := b.onSyncedFleet(ctx, sc, kept, o, rateList); err != nil {
				return fmt.Errorf("%s: %w", sc, err)
			}
		case "failover", "profile", "targets", "outage":
			if kept != nil { // free the apiserver and database of the big fleet first
				kept.drop()
				kept = nil
			}
			if err := b.onOwnFleet(ctx, sc, o); err != nil {
				return fmt.Errorf("%s: %w", sc, err)
			}
		default:
			return fmt.Errorf("unknown scenario %q", sc)
		}
	}
	return nil
}

// onSyncedFleet runs one of the scenarios that measure a fleet already in sync.
func (b *bench) onSyncedFleet(ctx context.Context, sc string, f *fleet, o options, rates []int) error {
	switch sc {
	case "noop":
		return b.noop(ctx, f)
	case "memory":
		return b.memory(ctx, f)
	case "sustained":
		return b.sustained(ctx, f, rates, o.sustainFor)
	case "leader":
		if o.compareBin != "" {
			if err := b.leader(ctx, f, o.running, o.compareBin, "before-"); err != nil {
				return err
			}
		}
		return b.leader(ctx, f, o.running, b.datajobs, "")
	default:
		return b.latency(ctx, f, o.changes, o.latencyJobs)
	}
}

// onOwnFleet runs one of the scenarios that make fleets of their own.
func (b *bench) onOwnFleet(ctx context.Context, sc string, o options) error {
	switch sc {
	case "profile":
		return b.profileScenario(ctx, o.profileN, o.repeat)
	case "targets":
		return b.targets(ctx, o.targetsN, o.failoverN)
	case "outage":
		return b.outage(ctx, o.outageN, o.outageFor)
	}
	return b.failover(ctx, o.failoverN, o.hogs)
}

func (b *bench) printf(format string, args ...any) {
	fmt.Fprintf(b.report, format, args...)
}

// profile runs fn under the CPU profiler, writing out/<name>.pprof.
func (b *bench) profile(name string, fn func() error) error {
	path := filepath.Join(b.outDir, name+".pprof")
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		return err
	}
	err = fn()
	pprof.StopCPUProfile()
	return err
}

func loadEnvFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if ok && k != "" && !strings.HasPrefix(k, "#") {
			if err := os.Setenv(k, v); err != nil {
				return err
			}
		}
	}
	return sc.Err()
}

func parseLimits(s string) (limits, error) {
	switch s {
	case "auto":
		return limits{}, nil
	case "none", "-1":
		return limits{QPS: -1}, nil
	}
	q, b, ok := strings.Cut(s, "/")
	qps, err1 := strconv.ParseFloat(q, 32)
	burst, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || qps <= 0 || burst <= 0 {
		return limits{}, fmt.Errorf("-kube-limits %q: want QPS/burst, such as 50/100", s)
	}
	return limits{QPS: float32(qps), Burst: burst}, nil
}

func parseInts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q: want positive integers separated by commas", s)
		}
		out = append(out, n)
	}
	return out, nil
}

func cpuModel() string {
	raw, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "?"
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }
