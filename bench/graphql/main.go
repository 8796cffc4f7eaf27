// Command graphql benchmarks the GraphQL jobs query of datajobs over loopback HTTP, next
// to the raw SQL of the same page measured in the same run.
//
// It seeds a fresh database with -jobs jobs, -deployed of them deployed (random teams,
// schedules, python versions, sync states and last executions), serves the API in this
// process on 127.0.0.1, and asks for a 50-job page with deployments and totals, the way
// the VDK UI does, in five scenarios (no filter, a team, a jobName wildcard, sorted by last
// execution time, sorted by the next run) at 1 and 16 concurrent clients, through the
// server's admission (its -max-concurrent-graphql slots and -admission-wait queue, as
// serve's flags): a query refused with 429 is counted in its row, not a failure of the
// run. For each it then sends the statements
// the store sent for that page (captured with a pgx tracer) straight to PostgreSQL from a
// pool of the same size, reading the rows without decoding them: the floor.
//
// It uses DATAJOBS_TEST_DATABASE_URL when set, else starts its own PostgreSQL (fsync off)
// in a temporary folder. Every loop is bounded by -requests and -max-time, and the whole
// run by -timeout. docs/benchmarks.md has the results and the command.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"         //nolint:depguard // the benchmark measures the raw SQL floor
	"github.com/jackc/pgx/v5/pgxpool" //nolint:depguard // the raw SQL floor uses a pool like the store's
	"github.com/prometheus/client_golang/prometheus"

	"github.com/datajobs/datajobs/bench/internal/seed"
	"github.com/datajobs/datajobs/bench/internal/sqlcapture"
	"github.com/datajobs/datajobs/bench/internal/stats"
	"github.com/datajobs/datajobs/internal/graphapi"
	"github.com/datajobs/datajobs/internal/httpapi"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/slots"
	"github.com/datajobs/datajobs/internal/store"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/graphql:", err)
		os.Exit(1)
	}
}

// pageQuery is a 50-job page with deployments and totals, as the VDK UI asks for it.
const pageQuery = `query($filter: [Predicate]) { jobs(pageNumber: 1, pageSize: 50, filter: $filter) {
  content { jobName
    config { team description schedule { scheduleCron nextRunEpochSeconds } contacts { notifiedOnJobDeploy } }
    deployments { id enabled jobVersion jobPythonVersion vdkVersion lastDeployedBy lastDeployedDate status syncStatus
      resources { cpuRequest cpuLimit memoryRequest memoryLimit }
      lastExecutionStatus lastExecutionTime lastExecutionDuration } }
  totalPages totalItems } }`

type scenario struct {
	name, variables string
}

func scenarios() []scenario {
	return []scenario{
		{"no filter", `{"filter":[]}`},
		{"team filter", `{"filter":[{"property":"config.team","pattern":"team-07"}]}`},
		{"jobName wildcard", `{"filter":[{"property":"jobName","pattern":"*12*"}]}`},
		{"sort by last execution time", `{"filter":[{"property":"deployments.lastExecutionTime","sort":"DESC"}]}`},
		{"sort by next run", `{"filter":[{"property":"config.schedule.nextRunEpochSeconds","sort":"ASC"}]}`},
	}
}

func run() error {
	var (
		jobs, deployed, requests, slotCount int
		maxTime, timeout, admissionWait     time.Duration
	)
	flag.IntVar(&jobs, "jobs", 10000, "number of jobs")
	flag.IntVar(&deployed, "deployed", 8000, "number of deployed jobs")
	flag.IntVar(&requests, "requests", 2000, "requests per scenario and concurrency (after 100 warm-up requests)")
	flag.DurationVar(&maxTime, "max-time", 30*time.Second, "stop a measurement after this long even if fewer requests were sent")
	flag.DurationVar(&timeout, "timeout", 10*time.Minute, "stop everything after this long")
	flag.IntVar(&slotCount, "max-concurrent-graphql", 8, "GraphQL queries in progress at once, as serve's flag")
	flag.DurationVar(&admissionWait, "admission-wait", slots.DefaultWait, "longest a query waits for a slot, as serve's flag (negative: refused at once)")
	clientsFlag := flag.String("clients", "1,16", "the numbers of concurrent clients to measure, comma-separated")
	flag.Parse()
	var clientCounts []int
	for _, c := range strings.Split(*clientsFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n < 1 {
			return fmt.Errorf("-clients: %q is not a positive number", c)
		}
		clientCounts = append(clientCounts, n)
	}
	if deployed > jobs {
		return errors.New("-deployed must be at most -jobs")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The server logs as in production (one JSON line per request), to nowhere.
	log := slog.New(slog.NewJSONHandler(io.Discard, nil)) //nolint:sloglint // formatting each line is part of the cost measured

	dbURL, drop, err := seed.Database(ctx, "bench_graphql")
	if err != nil {
		return err
	}
	defer drop()

	tracer := &sqlcapture.Capture{}
	db, err := store.Open(ctx, store.Config{URL: dbURL, Tracer: tracer})
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.Migrate(ctx); err != nil {
		return err
	}
	start := time.Now()
	if err := seed.Jobs(ctx, dbURL, jobs, deployed); err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	fmt.Printf("seeded %d jobs (%d deployed) in %s\n", jobs, deployed, time.Since(start).Round(time.Millisecond))

	svc, err := service.New(service.Config{SupportedPythonVersions: []string{"3.9", "3.11"}}, db)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	gql, err := graphapi.New(graphapi.Config{
		DefaultResources: svc.Config().Resources.Default, Logger: log,
		MaxConcurrent: slotCount, Admission: slots.Queue{Wait: admissionWait, WaitFlag: "-admission-wait", Metrics: slots.NewMetrics(reg)},
	}, svc)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: httpapi.New(httpapi.Config{JobsQuery: gql}, svc, log), ReadHeaderTimeout: 10 * time.Second}
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(ln) })
	defer func() {
		_ = srv.Shutdown(context.WithoutCancel(ctx))
		wg.Wait()
	}()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}
	base := "http://" + ln.Addr().String() + "/data-jobs/for-team/any/jobs?"

	// The floor's pool has the store's default size, as the server's.
	floorCfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return err
	}
	floor, err := pgxpool.NewWithConfig(ctx, floorCfg)
	if err != nil {
		return err
	}
	defer floor.Close()

	fmt.Printf("\nGOMAXPROCS=%d, store and floor pools of %d connections, %d requests per row (after 100 warm-up), %d GraphQL slots, admission wait %s\n\n",
		runtime.GOMAXPROCS(0), floorCfg.MaxConns, requests, slotCount, admissionWait)
	fmt.Println("| scenario | clients | HTTP p50 | HTTP p99 | HTTP req/s | waited for a slot | 429s | raw SQL p50 | raw SQL p99 | p50 ratio | items |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	for _, sc := range scenarios() {
		target := base + url.Values{"query": {pageQuery}, "variables": {sc.variables}}.Encode()
		items, err := check(ctx, client, target)
		if err != nil {
			return fmt.Errorf("%s: %w", sc.name, err)
		}
		tracer.Start()
		if _, err := check(ctx, client, target); err != nil {
			return err
		}
		stmts := tracer.Stop()
		for _, clients := range clientCounts {
			waitsBefore := waits(reg)
			httpRun, err := measure(ctx, clients, requests, maxTime, func(ctx context.Context) error {
				_, err := get(ctx, client, target)
				return err
			})
			if err != nil {
				return fmt.Errorf("%s: %w", sc.name, err)
			}
			sqlRun, err := measure(ctx, clients, requests, maxTime, func(ctx context.Context) error {
				return replay(ctx, floor, stmts)
			})
			if err != nil {
				return fmt.Errorf("%s raw SQL: %w", sc.name, err)
			}
			h50, s50 := stats.Percentile(httpRun.lat, 50), stats.Percentile(sqlRun.lat, 50)
			fmt.Printf("| %s | %d | %s | %s | %.0f | %d | %d | %s | %s | %.1fx | %s |\n", sc.name, clients,
				ms(h50), ms(stats.Percentile(httpRun.lat, 99)), httpRun.rate, waits(reg)-waitsBefore, httpRun.refused,
				ms(s50), ms(stats.Percentile(sqlRun.lat, 99)), float64(h50)/float64(s50), items)
		}
		fmt.Fprintf(os.Stderr, "statements of %q:\n", sc.name)
		for _, s := range stmts {
			fmt.Fprintf(os.Stderr, "  %s\n  args %v\n", strings.Join(strings.Fields(s.SQL), " "), s.Args)
		}
	}
	return nil
}

// check runs the query once and returns its totalItems.
func check(ctx context.Context, client *http.Client, target string) (string, error) {
	body, err := get(ctx, client, target)
	if err != nil {
		return "", err
	}
	i := strings.Index(body, `"totalItems":`)
	if i < 0 || !strings.Contains(body, `"errors":[]`) || !strings.Contains(body, `"deployments":[{`) {
		return "", fmt.Errorf("unexpected answer: %.300s", body)
	}
	return strings.TrimRight(strings.SplitN(body[i+len(`"totalItems":`):], ",", 2)[0], "}\n"), nil
}

func get(ctx context.Context, client *http.Client, target string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return "", err
	}
	res, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return "", err
	}
	if res.StatusCode == http.StatusTooManyRequests {
		return "", fmt.Errorf("%w: %.300s", errRefused, b)
	}
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d: %.300s", res.StatusCode, b)
	}
	return string(b), nil
}

// waits is how many queries have waited for a slot (warm-up included), from the admission's
// wait histogram.
func waits(reg *prometheus.Registry) uint64 {
	families, _ := reg.Gather()
	var n uint64
	for _, f := range families {
		if f.GetName() == "datajobs_admission_wait_seconds" {
			for _, m := range f.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}

// errRefused is a 429: the server's admission refused the query (no slot came in time).
var errRefused = errors.New("refused with 429")

// statement is one SQL statement the store sent, with its arguments.
// replay sends the statements in one batch, as the store does, and reads every row
// without decoding it.
func replay(ctx context.Context, pool *pgxpool.Pool, stmts []sqlcapture.Statement) error {
	b := &pgx.Batch{}
	for _, s := range stmts {
		b.Queue(s.SQL, s.Args...).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				_ = rows.RawValues()
			}
			return rows.Err()
		})
	}
	return pool.SendBatch(ctx, b).Close()
}

// result is what measure saw: the latencies of the calls that succeeded, their rate, and
// the calls refused with 429 (errRefused), which are counted and not timed.
type result struct {
	lat     []time.Duration
	rate    float64
	refused int
}

// measure runs do from clients goroutines, 100 times for warm-up then until requests
// calls or maxTime. A refusal (errRefused) is counted and the loop goes on; any other
// error ends the measurement.
func measure(ctx context.Context, clients, requests int, maxTime time.Duration, do func(context.Context) error) (result, error) {
	for range 100 {
		if err := do(ctx); err != nil {
			return result{}, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, maxTime)
	defer cancel()
	var (
		next    atomic.Int64
		mu      sync.Mutex
		out     = result{lat: make([]time.Duration, 0, requests)}
		firstEr error
		wg      sync.WaitGroup
	)
	start := time.Now()
	for range clients {
		wg.Go(func() {
			for next.Add(1) <= int64(requests) && ctx.Err() == nil {
				t := time.Now()
				err := do(ctx)
				d := time.Since(t)
				mu.Lock()
				switch {
				case errors.Is(err, errRefused):
					out.refused++
				case err != nil && ctx.Err() == nil:
					firstEr = cmp.Or(firstEr, err)
				case err == nil:
					out.lat = append(out.lat, d)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstEr != nil {
		return result{}, firstEr
	}
	if len(out.lat) == 0 {
		return result{}, fmt.Errorf("no request completed (%d refused with 429)", out.refused)
	}
	out.rate = float64(len(out.lat)) / elapsed.Seconds()
	return out, nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }
