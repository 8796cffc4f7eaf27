// Command triggers benchmarks triggers (issue 42) on kwok, against a real PostgreSQL,
// kube-apiserver and kube-controller-manager (the environment of `datajobs dev
// --env-only`), with the REST API served in process and the execution tracker and the
// trigger firer running in process as the leader runs them (their default settings):
//
//   - floor: -starts manual starts one after the other: the time from the start's answer
//     (its row committed) to its Job seen by a watch;
//   - triggers: signed events sent to a webhook trigger's invocation URL at -rate a second
//     for -seconds (each its own goroutine, on a ticker): the time from the 202 (the event
//     committed) to the Job of the run it started seen by the watch, p50/p99/max; then
//     every event is checked: none lost (every event started a run), none duplicated (no
//     event started two).
//
// The tracker's part of each latency (run committed -> Job seen) is split where it goes
// (probe.go): the tracker's queue (committed -> its row read), the start (row read -> the
// Job's create answered: the CronJob's read and the create) and the benchmark's watch
// (create answered -> Job seen), with each request of the tracker's client timed, its
// queue's counts and the waits for a connection of the database pool the API and the
// leader share, as in a server (pool.go; -db-max-conns of them, 16 as serve's default,
// server.DefaultDBMaxConns); -cpuprofile writes a CPU profile of each phase.
//
// The trigger's job has concurrency policy Allow (its runs go side by side: the firer is
// measured, not the policy); kwok's stages run and complete the pods. It reads
// DATAJOBS_TEST_DATABASE_URL and DATAJOBS_TEST_KUBECONFIG:
//
//	bash hack/with-env.sh .cache/bin/datajobs go run ./bench/triggers
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/datajobs/datajobs/bench/internal/moments"
	"github.com/datajobs/datajobs/bench/internal/stats"
	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/firer"
	"github.com/datajobs/datajobs/internal/httpapi"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/tracker"
	"github.com/datajobs/datajobs/internal/trigger"
)

const (
	team    = "bench"
	jobName = "bench-target"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/triggers:", err)
		os.Exit(1)
	}
}

func run() error {
	rate := flag.Int("rate", 100, "signed events a second")
	seconds := flag.Int("seconds", 60, "seconds of events")
	starts := flag.Int("starts", 100, "manual starts of the floor, one after the other")
	leaderPool := flag.Bool("leader-pool", false, "the leader (tracker, firer) on a database pool of its own, not the API's (a server shares one)")
	floorRate := flag.Bool("floor-at-rate", true, "after the events, the floor at their rate: manual starts at -rate a second for -seconds, round -targets jobs of their own")
	targets := flag.Int("targets", 10, "jobs, each with its webhook trigger, the events go round among (a job's execution ids are its name and a second: at most 1000 runs of one job within ~17 min)")
	timeout := flag.Duration("timeout", 15*time.Minute, "bound of the whole benchmark")
	workers := flag.Int("tracker-workers", 0, "the execution tracker's workers (0: its default, tracker.DefaultWorkers)")
	firerWorkers := flag.Int("firer-workers", 0, "the trigger firer's workers (0: its default, firer.WorkersDefault)")
	cpuProfile := flag.String("cpuprofile", "", "write CPU profiles of the process to this path's .events and .floor files, for the events and the floor at their rate")
	maxConns := flag.Int("db-max-conns", 16, "connections of the database pool the API and the leader share (serve's --db-max-conns defaults to 16)")
	flag.Parse()
	fmt.Printf("machine: %d CPUs, load average at the start %s\n", runtime.NumCPU(), stats.LoadAverage())
	defer func() { fmt.Printf("load average at the end %s\n", stats.LoadAverage()) }()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	e, err := open(ctx, *maxConns)
	if err != nil {
		return err
	}
	defer e.Close()
	if _, err := e.job(ctx, 0); err != nil {
		return err
	}
	stopLeader, err := e.leader(ctx, *leaderPool, *workers, *firerWorkers)
	if err != nil {
		return err
	}
	defer stopLeader()
	stopWatch, err := e.watch(ctx)
	if err != nil {
		return err
	}
	defer stopWatch()
	stopListen, err := e.listen(ctx)
	if err != nil {
		return err
	}
	defer stopListen()

	floor, err := e.floor(ctx, *starts)
	if err != nil {
		return err
	}
	fmt.Printf("floor, %d manual starts one after the other: start committed -> Job seen: %s\n", len(floor), stats.Summary(floor))

	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	srv := httptest.NewServer(httpapi.New(httpapi.Config{}, e.Svc, log))
	defer srv.Close()
	urls, secretsOf, err := e.triggers(ctx, srv.URL, *targets, *rate)
	if err != nil {
		return err
	}
	e.probe.reset() // the floor's requests are not the events'
	stopProfile, err := profile(suffixed(*cpuProfile, ".events"))
	if err != nil {
		return err
	}
	accepted, sendErrs := send(ctx, urls, secretsOf, *rate, *seconds)
	if sendErrs > 0 {
		fmt.Printf("  %d calls failed\n", sendErrs)
	}
	lat, lost, dup, err := e.check(ctx, accepted)
	stopProfile()
	if err != nil {
		return err
	}
	fmt.Printf("triggers, %d signed events at %d/s for %d s: event accepted (202) -> Job seen: %s\n", len(lat.total), *rate, *seconds, stats.Summary(lat.total))
	fmt.Printf("  of which accepted -> run committed (the firer): %s\n", stats.Summary(lat.fired))
	fmt.Printf("  and run committed -> Job seen (the tracker): %s\n", stats.Summary(lat.created))
	fmt.Printf("  lost %d, duplicated %d\n", lost, dup)
	fmt.Println(" ", e.firings.summary())
	e.probe.report("the events", lat.runs, e.moment(e.committed), e.moment(e.seen))
	if !*floorRate {
		return nil
	}
	var names []string
	for i := range *targets {
		name, err := e.job(ctx, *targets+i)
		if err != nil {
			return err
		}
		names = append(names, name)
	}
	if stopProfile, err = profile(suffixed(*cpuProfile, ".floor")); err != nil {
		return err
	}
	atRate, ids, failed, err := e.floorAt(ctx, names, *rate, *seconds)
	stopProfile()
	if err != nil {
		return err
	}
	fmt.Printf("floor at the events' rate, %d manual starts at %d/s for %d s (%d failed): start committed -> Job seen: %s\n",
		len(atRate), *rate, *seconds, failed, stats.Summary(atRate))
	e.probe.report("the floor at the rate", ids, e.moment(e.committed), e.moment(e.seen))
	return nil
}

// triggers makes n webhook triggers, each on a job of its own (the first the floor's), their
// bound of events above rate a second, and returns their invocation URLs on server and
// their signing secrets.
func (e *env) triggers(ctx context.Context, server string, n, rate int) (urls []string, secrets [][]byte, err error) {
	for i := range n {
		name := jobName
		if i > 0 {
			if name, err = e.job(ctx, i); err != nil {
				return nil, nil, err
			}
		}
		t, err := e.Svc.CreateTrigger(ctx, team, []byte(fmt.Sprintf(`{"name":"bench-hook-%02d","target":{"job_name":%q},"on":{"kind":"webhook"},"max_events_per_minute":%d}`,
			i, name, min(trigger.MaxEventsPerMinute, rate*60*2))), "bench")
		if err != nil {
			return nil, nil, fmt.Errorf("create trigger: %w", err)
		}
		urls, secrets = append(urls, server+"/data-jobs/triggers/"+t.ID+"/events"), append(secrets, t.Secret)
	}
	return urls, secrets, nil
}

// send sends rate signed events a second for seconds, round the urls (signed with their
// secrets), and returns when each event (by id) was accepted, and how many calls failed.
func send(ctx context.Context, urls []string, secrets [][]byte, rate, seconds int) (map[int64]time.Time, int) {
	// At most 64 connections: one a call piled up to thousands of sockets on a loaded
	// machine, and calls failed with EOF.
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 64, MaxIdleConnsPerHost: 64}}
	return paced(rate, seconds, "call", func(i int) (int64, error) {
		return call(ctx, client, urls[i%len(urls)], secrets[i%len(urls)], i)
	})
}

// paced calls do(i) for i from 0 to rate×seconds, rate a second on a ticker, each call in
// its own goroutine, and returns when each call's answer (its key: an event, an
// execution) came, and how many calls failed (the first three printed, as what).
func paced[K comparable](rate, seconds int, what string, do func(i int) (K, error)) (map[K]time.Time, int) {
	var mu sync.Mutex
	at, failed := map[K]time.Time{}, 0
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for i := range rate * seconds {
		<-tick.C
		wg.Go(func() {
			k, err := do(i)
			now := time.Now()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if failed++; failed <= 3 {
					fmt.Fprintf(os.Stderr, "bench/triggers: %s: %v\n", what, err)
				}
				return
			}
			at[k] = now
		})
	}
	wg.Wait()
	return at, failed
}

// call sends the signed event i and returns its event id.
func call(ctx context.Context, client *http.Client, url string, secret []byte, i int) (int64, error) {
	body := []byte(fmt.Sprintf(`{"n":%d}`, i))
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(trigger.TimestampHeader, ts)
	req.Header.Set(trigger.SignatureHeader, trigger.Sign(secret, ts, body))
	req.Header.Set(trigger.IdempotencyHeader, "event-"+strconv.Itoa(i))
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		return 0, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	var out struct {
		EventID int64 `json:"event_id"`
	}
	return out.EventID, json.Unmarshal(b, &out)
}

// leader runs the execution tracker and the trigger firer (their defaults, but for their
// workers when not 0) until the returned stop is called, as a leader's term runs them; on
// the API's database pool, as a server does, or with own on a pool of its own.
func (e *env) leader(ctx context.Context, own bool, workers, firerWorkers int) (stop func(), err error) {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	db := e.DB
	if own {
		if db, err = store.Open(ctx, store.Config{URL: e.URL, MaxConns: 16, Quotas: store.TeamQuotas{MaxActiveExecutions: -1}}); err != nil {
			return nil, err
		}
		e.firings.Store = db
	}
	client, err := e.probe.client(os.Getenv("DATAJOBS_TEST_KUBECONFIG"))
	if err != nil {
		return nil, err
	}
	x := tracker.New(tracker.Config{Namespace: e.NS, Settings: controller.Settings{Workers: workers, Interval: time.Hour, Logger: log}, Metrics: tracker.NewMetrics(e.probe.reg)}, e.probe.store(db), client)
	f := firer.New(firer.Config{Settings: controller.Settings{Workers: firerWorkers, Logger: log}, Registerer: e.probe.reg}, e.firings)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = x.Run(ctx, e.Epoch) })
	wg.Go(func() { _ = f.Run(ctx, e.Epoch) })
	return func() {
		cancel()
		wg.Wait()
		if own {
			db.Close()
		}
	}, nil
}

// latencies are an event's latencies: accepted -> Job seen (total), split at its run's
// commit: accepted -> committed (fired), committed -> Job seen (created); runs are the
// events' runs.
type latencies struct {
	total, fired, created []time.Duration
	runs                  []string
}

// check waits for the Job of every accepted event's run and returns the latencies, the
// events lost (no run) and duplicated (more than one run).
func (e *env) check(ctx context.Context, accepted map[int64]time.Time) (lat latencies, lost, dup int, err error) {
	var runs map[int64][]string
	deadline := time.Now().Add(5 * time.Minute)
	for {
		rows, err := e.Conn.Query(ctx, `SELECT id, started_by FROM data_job_execution WHERE started_by LIKE 'trigger/%'`)
		if err != nil {
			return lat, 0, 0, fmt.Errorf("read runs: %w", err)
		}
		runs = map[int64][]string{}
		for rows.Next() {
			var id, by string
			if err := rows.Scan(&id, &by); err != nil {
				return lat, 0, 0, err
			}
			ev, _ := strconv.ParseInt(by[strings.LastIndex(by, "/")+1:], 10, 64)
			runs[ev] = append(runs[ev], id)
		}
		if rows.Err() != nil {
			return lat, 0, 0, rows.Err()
		}
		if len(runs) >= len(accepted) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	for ev, at := range accepted {
		ids := runs[ev]
		switch {
		case len(ids) == 0:
			lost++
			continue
		case len(ids) > 1:
			dup++
		}
		seen, err := e.seen.Wait(ctx, ids[0])
		if err != nil {
			return lat, 0, 0, err
		}
		committed, err := e.committed.Wait(ctx, ids[0])
		if err != nil {
			return lat, 0, 0, err
		}
		lat.total = append(lat.total, seen.Sub(at))
		lat.fired = append(lat.fired, committed.Sub(at))
		lat.created = append(lat.created, seen.Sub(committed))
		lat.runs = append(lat.runs, ids[0])
	}
	return lat, lost, dup, nil
}

// suffixed is path with suffix, or "" for no path.
func suffixed(path, suffix string) string {
	if path == "" {
		return ""
	}
	return path + suffix
}

// moment is when m noted a name, if it did (without waiting).
func (e *env) moment(m *moments.Moments) func(string) (time.Time, bool) {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	return func(name string) (time.Time, bool) {
		t, err := m.Wait(done, name)
		return t, err == nil
	}
}
