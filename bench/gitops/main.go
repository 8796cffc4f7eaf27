// Command gitops benchmarks jobs as code (issue 46): a team's datajobs.yaml of -jobs jobs
// (each with its configuration and a deployment), POSTed to the REST API served in process
// (httptest, one client), against the same changes made through the API's own calls over
// the same server, one after the other, as a script of calls would make them.
//
// Each of -reps repetitions takes a new team through three steps: create (the file's
// first version on an empty team), change (a second version that changes every job: its
// description, schedule, contacts, and its deployment's version, retries and memory) and
// unchanged (the second version again). Each step is planned (dry_run=true) and then
// applied; the floor team takes the same steps through two calls a job (create: POST
// .../jobs and POST .../deployments; change and unchanged: PUT .../jobs/{job} and POST
// .../deployments). Each time is p50/p99 over the repetitions, with the statements the
// store sent and their time on the wire (client side: round trip and server).
//
// It needs only PostgreSQL: the one of DATAJOBS_TEST_DATABASE_URL, or a private one it
// starts (fsync off) when that is empty. docs/benchmarks.md ("Jobs as code"):
//
//	go run ./bench/gitops -jobs 1000 -reps 5
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/datajobs/datajobs/bench/internal/seed"
	"github.com/datajobs/datajobs/bench/internal/stats"
	"github.com/datajobs/datajobs/internal/httpapi"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/store"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/gitops:", err)
		os.Exit(1)
	}
}

// steps are the three steps of a repetition, in order.
var steps = []struct {
	name string
	file version
	want string // the apply's one action for every job
}{
	{"create", 0, "create"},
	{"change", 1, "update"},
	{"unchanged", 1, "unchanged"},
}

// target is the bound on an apply of the file.
const target = 2 * time.Second

// sample is one measured call or series of calls: its time and its statements.
type sample struct {
	took  time.Duration
	stmts stmtCount
}

func run() error {
	n := flag.Int("jobs", 1000, "jobs in the file")
	reps := flag.Int("reps", 5, "repetitions, each on a new team")
	skipFloor := flag.Bool("skip-floor", false, "measure the file only, not the API calls' floor")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the file's plans and applies (the service and the server, in this process) to this file")
	byText := flag.Bool("statements", false, "print the statements of the first repetition's change apply, by count")
	timeout := flag.Duration("timeout", 30*time.Minute, "bound of the whole benchmark")
	flag.Parse()
	fmt.Printf("machine: %d CPUs, load average at the start %s; %s\n", runtime.NumCPU(), stats.LoadAverage(), time.Now().UTC().Format(time.DateTime))
	defer func() { fmt.Printf("load average at the end %s\n", stats.LoadAverage()) }()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	dbURL, drop, err := seed.Database(ctx, "bench_gitops")
	if err != nil {
		return err
	}
	defer drop()
	tr := &tracer{}
	db, err := store.Open(ctx, store.Config{URL: dbURL, MaxConns: 8, Tracer: tr})
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.Migrate(ctx); err != nil {
		return err
	}
	svc, err := service.New(service.Config{SupportedPythonVersions: []string{"3.11"}}, db)
	if err != nil {
		return err
	}
	log := slog.New(slog.DiscardHandler)
	// A file of 1,000 jobs is ~0.4 MB; the default 1 MiB body cap holds ~2,500.
	srv := httptest.NewServer(httpapi.New(httpapi.Config{MaxBodyBytes: 64 << 20}, svc, log))
	defer srv.Close()
	c := &client{base: srv.URL, http: srv.Client(), tr: tr}

	plans, applies := make([][]sample, len(steps)), make([][]sample, len(steps))
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	c.statements = *byText
	for r := range *reps {
		if err := c.fileRep(ctx, fmt.Sprintf("gitops-%d", r), *n, plans, applies); err != nil {
			pprof.StopCPUProfile()
			return err
		}
	}
	pprof.StopCPUProfile()
	floors := make([][]sample, len(steps))
	for r := range *reps {
		if *skipFloor {
			break
		}
		if err := c.floorRep(ctx, fmt.Sprintf("calls-%d", r), *n, floors); err != nil {
			return err
		}
	}
	report(*n, *reps, plans, applies, floors)
	return nil
}

// fileRep takes a new team through the steps with the file: each planned, then applied.
func (c *client) fileRep(ctx context.Context, team string, n int, plans, applies [][]sample) error {
	for i, st := range steps {
		file, err := fileOf(team, jobs(team, n, st.file))
		if err != nil {
			return err
		}
		for _, dry := range []bool{true, false} {
			byText := c.statements && team == "gitops-0" && st.name == "change" && !dry
			if byText {
				c.tr.byText, c.tr.byTime = map[string]int{}, map[string]time.Duration{}
			}
			s, err := c.apply(ctx, team, file, dry, st.want, n)
			if byText {
				printByText(c.tr.byText, c.tr.byTime)
				c.tr.byText, c.tr.byTime = nil, nil
			}
			if err != nil {
				return fmt.Errorf("%s, %s (dry run %v): %w", team, st.name, dry, err)
			}
			if dry {
				plans[i] = append(plans[i], s)
			} else {
				applies[i] = append(applies[i], s)
			}
		}
	}
	return nil
}

// floorRep takes a new team through the steps with the API's calls, two a job.
func (c *client) floorRep(ctx context.Context, team string, n int, floors [][]sample) error {
	for i, st := range steps {
		s, err := c.calls(ctx, team, jobs(team, n, st.file), i == 0)
		if err != nil {
			return fmt.Errorf("%s, %s: %w", team, st.name, err)
		}
		floors[i] = append(floors[i], s)
	}
	return nil
}

// printByText prints the statements of byText, the most sent first, then the time of
// those sent alone (byTime), the longest first.
func printByText(byText map[string]int, byTime map[string]time.Duration) {
	texts := slices.Collect(maps.Keys(byText))
	slices.SortFunc(texts, func(a, b string) int { return cmp.Compare(byText[b], byText[a]) })
	fmt.Println("the statements of the change's apply, by count:")
	for _, q := range texts {
		fmt.Printf("%6d  %.160s\n", byText[q], strings.Join(strings.Fields(q), " "))
	}
	texts = slices.Collect(maps.Keys(byTime))
	slices.SortFunc(texts, func(a, b string) int { return cmp.Compare(byTime[b], byTime[a]) })
	fmt.Println("the round trips of the statements sent alone (a batch's time is not split), by time:")
	for _, q := range texts[:min(len(texts), 8)] {
		fmt.Printf("%9s  %.150s\n", byTime[q].Round(time.Millisecond), strings.Join(strings.Fields(q), " "))
	}
}

// report prints, per step, the plan's and the apply's p50/p99 and the floor's, with the
// apply's ratio to the floor.
func report(n, reps int, plans, applies, floors [][]sample) {
	fmt.Printf("%d jobs, %d repetitions (p50 / p99 of the repetitions; statements sent, their round trips and time on the wire, at the p50)\n", n, reps)
	for i, st := range steps {
		p, a := summary(plans[i]), summary(applies[i])
		verdict := "met"
		if stats.Percentile(took(applies[i]), 50) >= target {
			verdict = "MISSED"
		}
		fmt.Printf("%-9s  plan %s\n           apply %s; target p50 < %s %s\n", st.name, p, a, target, verdict)
		if len(floors[i]) > 0 {
			f := summary(floors[i])
			fmt.Printf("           %d API calls %s\n           apply / calls at p50: %.3fx\n", 2*n, f, ratio(applies[i], floors[i]))
		}
	}
}

// summary is "p50 …, p99 … (k statements in r round trips, … on the wire)" of ss, the statements those of
// the median sample.
func summary(ss []sample) string {
	ds := took(ss)
	p := stats.Percentiles(ds, 50, 99)
	var med sample
	for _, s := range ss {
		if s.took == p[0] {
			med = s
		}
	}
	r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	return fmt.Sprintf("p50 %s, p99 %s (%d statements in %d round trips, %s on the wire)", r(p[0]), r(p[1]), med.stmts.n, med.stmts.trips, r(med.stmts.wire))
}

func took(ss []sample) []time.Duration {
	out := make([]time.Duration, len(ss))
	for i, s := range ss {
		out[i] = s.took
	}
	return out
}

func ratio(a, b []sample) float64 {
	return float64(stats.Percentile(took(a), 50)) / float64(stats.Percentile(took(b), 50))
}
