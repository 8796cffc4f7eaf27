// Command api benchmarks the datajobs REST API over loopback. With -jobs jobs deployed, it
// measures GET .../deployments/release and POST .../deployments through HTTP (the real
// handler, middleware and request log, on 127.0.0.1) at each -clients concurrency, and the
// store call underneath each (the same SQL, through the same pool) in the same run, and
// prints a Markdown table of p50/p99 latencies.
//
// With an OIDC provider (-oidc-issuer, else a private Ory Hydra when hack/hydra/build.sh
// built one), it then compares GET .../deployments/release on a handler in auth mode none
// and one in mode oidc (a real access token), in alternating rounds.
//
// Every measurement stops after -requests requests or -duration, whichever comes first,
// and the whole run after -timeout. It uses the PostgreSQL of -database-url (loopback
// only), or starts a private one in a temporary folder; it creates its own database and
// drops it at the end. docs/benchmarks.md (section API) has the command and results.
package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/datajobs/datajobs/internal/auth"
	"github.com/datajobs/datajobs/internal/devenv"
	"github.com/datajobs/datajobs/internal/httpapi"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/store"
)

const team = "bench-team"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/api:", err)
		os.Exit(1)
	}
}

type options struct {
	adminURL   string
	fast       bool
	jobs       int
	clients    []int
	requests   int
	duration   time.Duration
	maxConns   int
	timeout    time.Duration
	cpuProfile string
	oidcIssuer string
	oidcAdmin  string
	authRounds int
}

func run() error {
	var o options
	var clients string
	flag.StringVar(&o.adminURL, "database-url", os.Getenv("DATAJOBS_TEST_DATABASE_URL"), "a PostgreSQL URL on loopback whose user may create databases (default $DATAJOBS_TEST_DATABASE_URL; empty: start a private PostgreSQL)")
	flag.BoolVar(&o.fast, "fast", false, "start the private PostgreSQL without durability (fsync and synchronous_commit off)")
	flag.IntVar(&o.jobs, "jobs", 10000, "number of jobs, each deployed")
	flag.StringVar(&clients, "clients", "1,8,64", "concurrent clients of each measurement")
	flag.IntVar(&o.requests, "requests", 20000, "requests per measurement, at most")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "time per measurement, at most")
	flag.IntVar(&o.maxConns, "max-conns", 0, "database pool size (default: pgx's, max(4, CPUs))")
	flag.DurationVar(&o.timeout, "timeout", 15*time.Minute, "stop everything after this long")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the measurements (client and server, one process) to this file")
	flag.StringVar(&o.oidcIssuer, "oidc-issuer", os.Getenv("DATAJOBS_TEST_OIDC_ISSUER"), "issuer URL of an Ory Hydra to measure auth mode oidc with (default $DATAJOBS_TEST_OIDC_ISSUER; empty: start a private one if built, else skip)")
	flag.IntVar(&o.authRounds, "auth-rounds", 5, "alternating rounds of the auth mode comparison")
	flag.StringVar(&o.oidcAdmin, "oidc-admin-url", os.Getenv("DATAJOBS_TEST_OIDC_ADMIN_URL"), "admin API URL of that Hydra (default $DATAJOBS_TEST_OIDC_ADMIN_URL)")
	flag.Parse()
	for _, c := range strings.Split(clients, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n < 1 {
			return fmt.Errorf("bad -clients %q", clients)
		}
		o.clients = append(o.clients, n)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()

	if o.adminURL == "" {
		dir, err := os.MkdirTemp("", "bench-api-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if err := os.Chmod(dir, 0o711); err != nil { // PostgreSQL runs as another user
			return err
		}
		fmt.Fprintln(os.Stderr, "starting a private PostgreSQL in", dir)
		pg, err := devenv.StartPostgres(ctx, devenv.PostgresConfig{Dir: dir, Fast: o.fast})
		if err != nil {
			return err
		}
		defer pg.Stop() //nolint:errcheck // best effort at exit
		o.adminURL = pg.URL(devenv.DatabaseName)
	}
	if err := requireLoopback(o.adminURL); err != nil {
		return err
	}
	if o.oidcIssuer == "" {
		if bin := devenv.HydraBinary(); bin != "" {
			dir, err := os.MkdirTemp("", "bench-api-hydra-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			fmt.Fprintln(os.Stderr, "starting a private Ory Hydra in", dir)
			hy, err := devenv.StartHydra(ctx, devenv.HydraConfig{Bin: bin, PostgresURL: o.adminURL, Dir: dir})
			if err != nil {
				return err
			}
			defer hy.Stop() //nolint:errcheck // best effort at exit
			o.oidcIssuer, o.oidcAdmin = hy.IssuerURL, hy.AdminURL
		}
	}
	return benchmark(ctx, o)
}

// requireLoopback refuses a database anywhere but on this machine: the load goes to
// loopback only.
func requireLoopback(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return errors.New("-database-url must be a postgres:// URL")
	}
	host := u.Hostname()
	if host == "" || host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("-database-url must point to loopback, not %q", host)
}

func benchmark(ctx context.Context, o options) error {
	name := "bench_api_" + strings.ToLower(rand.Text()[:8])
	if err := devenv.CreateDatabase(ctx, o.adminURL, name, ""); err != nil {
		return fmt.Errorf("create database: %w", err)
	}
	defer func() {
		dropCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := devenv.DropDatabase(dropCtx, o.adminURL, name); err != nil {
			fmt.Fprintln(os.Stderr, "drop database:", err)
		}
	}()
	u, _ := url.Parse(o.adminURL)
	u.Path = "/" + name
	st, err := store.Open(ctx, store.Config{URL: u.String(), MaxConns: int32(o.maxConns)})
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := st.Migrate(ctx); err != nil {
		return err
	}
	svc, err := service.New(service.Config{SupportedPythonVersions: []string{"3.11"}}, st)
	if err != nil {
		return err
	}

	names := make([]string, o.jobs)
	for i := range names {
		names[i] = fmt.Sprintf("bench-job-%05d", i)
	}
	start := time.Now()
	if err := seed(ctx, svc, names); err != nil {
		return err
	}
	seeded := time.Since(start)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil)) //nolint:sloglint // request logs are formatted, as in production, then dropped
	timer := &handlerTimer{next: httpapi.New(httpapi.Config{}, svc, logger)}
	srv := &http.Server{Handler: timer, ReadHeaderTimeout: 10 * time.Second}
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(ln) })
	defer func() {
		_ = srv.Shutdown(context.WithoutCancel(ctx))
		wg.Wait()
	}()
	base := "http://" + ln.Addr().String() + "/data-jobs/for-team/" + team + "/jobs/"
	oidcBase, token, stopOIDC, err := serveOIDC(ctx, o, svc, logger)
	if err != nil {
		return err
	}
	defer stopOIDC()
	client := &http.Client{Transport: &http.Transport{
		MaxIdleConns: 512, MaxIdleConnsPerHost: 512, DisableCompression: true,
	}}
	defer client.CloseIdleConnections()

	pool := cmp.Or(o.maxConns, max(4, runtime.NumCPU()))
	fmt.Printf("jobs=%d (seeded in %s), database pool=%d, GOMAXPROCS=%d, CPUs=%d, per measurement at most %d requests or %s\n\n",
		o.jobs, seeded.Round(time.Millisecond), pool, runtime.GOMAXPROCS(0), runtime.NumCPU(), o.requests, o.duration)
	fmt.Println("| operation | clients | HTTP p50 | HTTP p99 | SQL p50 | SQL p99 | HTTP/SQL p50 | handler p50 | HTTP req/s | SQL req/s |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")

	ops := []struct {
		name      string
		sql, http op
	}{
		{
			name: "GET .../deployments/release",
			sql: func(ctx context.Context, name string, _ int) error {
				_, err := st.GetDeploymentState(ctx, team, name)
				return err
			},
			http: func(ctx context.Context, name string, _ int) error {
				return call(ctx, client, "GET", base+name+"/deployments/release", nil, http.StatusOK)
			},
		},
		{
			name: "POST .../deployments",
			sql: func(ctx context.Context, name string, i int) error {
				_, err := st.ChangeDeployment(ctx, team, name, func(_ job.Job, cur *job.Deployment) (job.Deployment, error) {
					d := *cur
					d.JobVersion, d.DeployedBy, d.DeployedDate = "s"+strconv.Itoa(i), "bench", time.Now()
					return d, nil
				})
				return err
			},
			http: func(ctx context.Context, name string, i int) error {
				body := []byte(`{"job_version":"h` + strconv.Itoa(i) + `"}`)
				return call(ctx, client, "POST", base+name+"/deployments", body, http.StatusAccepted)
			},
		},
	}
	// Warm both paths (connections, caches) before measuring.
	for _, o2 := range ops {
		for _, f := range []op{o2.sql, o2.http} {
			if _, err := measure(ctx, names, 8, 500, o.duration, f); err != nil {
				return err
			}
		}
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	for _, o2 := range ops {
		for _, c := range o.clients {
			sqlRes, err := measure(ctx, names, c, o.requests, o.duration, o2.sql)
			if err != nil {
				return fmt.Errorf("%s sql: %w", o2.name, err)
			}
			timer.reset(true)
			httpRes, err := measure(ctx, names, c, o.requests, o.duration, o2.http)
			if err != nil {
				return fmt.Errorf("%s http: %w", o2.name, err)
			}
			handler := timer.reset(false)
			fmt.Printf("| %s | %d | %s | %s | %s | %s | %.2f | %s | %.0f | %.0f |\n", o2.name, c,
				ms(httpRes.p(50)), ms(httpRes.p(99)), ms(sqlRes.p(50)), ms(sqlRes.p(99)),
				float64(httpRes.p(50))/float64(sqlRes.p(50)), ms(handler.p(50)), httpRes.rate(), sqlRes.rate())
		}
	}
	return compareAuth(ctx, o, names, client, base, oidcBase, token)
}

// compareAuth measures GET deployment in auth modes none and oidc, alternating, and
// prints the best p50 of each over the rounds: alternating and taking the best keeps the
// load of other processes on a shared machine out of the ratio.
func compareAuth(ctx context.Context, o options, names []string, client *http.Client, base, oidcBase, token string) error {
	if oidcBase == "" {
		fmt.Println("\nno OIDC provider (build it with hack/hydra/build.sh or pass -oidc-issuer): auth mode oidc not measured")
		return nil
	}
	none := func(ctx context.Context, name string, _ int) error {
		return call(ctx, client, "GET", base+name+"/deployments/release", nil, http.StatusOK)
	}
	oidc := func(ctx context.Context, name string, _ int) error {
		return call(ctx, client, "GET", oidcBase+name+"/deployments/release", nil, http.StatusOK, "Authorization", "Bearer "+token)
	}
	if _, err := measure(ctx, names, 8, 500, o.duration, oidc); err != nil { // warm
		return err
	}
	fmt.Printf("\nGET .../deployments/release by auth mode, best p50 of %d alternating rounds:\n\n", o.authRounds)
	fmt.Println("| clients | none p50 | oidc p50 | oidc/none |")
	fmt.Println("|---|---|---|---|")
	for _, c := range o.clients {
		var bestNone, bestOIDC time.Duration
		for range o.authRounds {
			for _, m := range []struct {
				f    op
				best *time.Duration
			}{{none, &bestNone}, {oidc, &bestOIDC}} {
				r, err := measure(ctx, names, c, o.requests, o.duration, m.f)
				if err != nil {
					return err
				}
				if *m.best == 0 || r.p(50) < *m.best {
					*m.best = r.p(50)
				}
			}
		}
		fmt.Printf("| %d | %s | %s | %.2f |\n", c, ms(bestNone), ms(bestOIDC), float64(bestOIDC)/float64(bestNone))
	}
	return nil
}

// serveOIDC serves the API in auth mode oidc against the provider of o, and returns its
// base URL and an access token of a client in the bench team ("" when o has none).
func serveOIDC(ctx context.Context, o options, svc *service.Service, logger *slog.Logger) (string, string, func(), error) {
	if o.oidcIssuer == "" {
		return "", "", func() {}, nil
	}
	verifier, err := auth.NewOIDC(auth.OIDCConfig{IssuerURLs: []string{o.oidcIssuer}, Audience: "datajobs"})
	if err != nil {
		return "", "", nil, err
	}
	token, err := clientToken(ctx, o)
	if err != nil {
		return "", "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", "", nil, err
	}
	srv := &http.Server{Handler: httpapi.New(httpapi.Config{Auth: verifier}, svc, logger), ReadHeaderTimeout: 10 * time.Second}
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(ln) })
	stop := func() {
		_ = srv.Shutdown(context.WithoutCancel(ctx))
		wg.Wait()
	}
	return "http://" + ln.Addr().String() + "/data-jobs/for-team/" + team + "/jobs/", token, stop, nil
}

// clientToken creates a client-credentials client of the bench team at the provider's
// admin API and returns an access token of it.
func clientToken(ctx context.Context, o options) (string, error) {
	body := `{"grant_types":["client_credentials"],"audience":["datajobs"],"token_endpoint_auth_method":"client_secret_basic","metadata":{"teams":["` + team + `"],"username":"bench"}}`
	var c struct {
		ID     string `json:"client_id"`
		Secret string `json:"client_secret"`
	}
	if err := postJSON(ctx, o.oidcAdmin+"/admin/clients", "application/json", body, nil, &c); err != nil {
		return "", err
	}
	form := url.Values{"grant_type": {"client_credentials"}, "audience": {"datajobs"}}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	err := postJSON(ctx, o.oidcIssuer+"/oauth2/token", "application/x-www-form-urlencoded", form.Encode(), func(r *http.Request) {
		r.SetBasicAuth(url.QueryEscape(c.ID), url.QueryEscape(c.Secret))
	}, &tok)
	return tok.AccessToken, err
}

func postJSON(ctx context.Context, u, contentType, body string, edit func(*http.Request), out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", contentType)
	if edit != nil {
		edit(req)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %s: %s", u, res.Status, b)
	}
	return json.Unmarshal(b, out)
}

// seed creates and deploys every job through the service, 8 at a time.
func seed(ctx context.Context, svc *service.Service, names []string) error {
	var next atomic.Int64
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(names) || ctx.Err() != nil {
					return
				}
				j := job.Job{Name: names[i], Schedule: "15 10 * * *", NotificationDelayPeriodMinutes: 240}
				if _, err := svc.CreateJob(ctx, team, j); err != nil {
					errs <- fmt.Errorf("create %s: %w", names[i], err)
					return
				}
				v := "v1"
				if _, err := svc.Deploy(ctx, team, names[i], job.DeploymentChange{JobVersion: &v}, "bench"); err != nil {
					errs <- fmt.Errorf("deploy %s: %w", names[i], err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	return ctx.Err()
}

// op is one request on job name; i numbers the request.
type op func(ctx context.Context, name string, i int) error

type result struct {
	latencies []time.Duration // sorted
	elapsed   time.Duration
}

func (r result) p(q int) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	return r.latencies[min(len(r.latencies)-1, len(r.latencies)*q/100)]
}

func (r result) rate() float64 { return float64(len(r.latencies)) / r.elapsed.Seconds() }

// measure runs f from clients goroutines on random jobs until n requests are done or d
// has passed, and returns the latencies.
func measure(ctx context.Context, names []string, clients, n int, d time.Duration, f op) (result, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var (
		next    atomic.Int64
		mu      sync.Mutex
		all     []time.Duration
		firstEr error
		wg      sync.WaitGroup
	)
	start := time.Now()
	for w := range clients {
		wg.Go(func() {
			rng := mrand.New(mrand.NewPCG(uint64(w), 42))
			local := make([]time.Duration, 0, n/clients+1)
			for {
				i := int(next.Add(1))
				if i > n || ctx.Err() != nil {
					break
				}
				t := time.Now()
				err := f(ctx, names[rng.IntN(len(names))], i)
				if err != nil {
					if ctx.Err() != nil { // the time is up mid-request
						break
					}
					mu.Lock()
					firstEr = cmp.Or(firstEr, err)
					mu.Unlock()
					cancel()
					break
				}
				local = append(local, time.Since(t))
			}
			mu.Lock()
			all = append(all, local...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if firstEr != nil {
		return result{}, firstEr
	}
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return result{}, err
	}
	slices.Sort(all)
	return result{latencies: all, elapsed: time.Since(start)}, nil
}

func call(ctx context.Context, c *http.Client, method, url string, body []byte, want int, headers ...string) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := c.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode != want {
		return fmt.Errorf("%s %s: %d %s", method, url, res.StatusCode, b)
	}
	return nil
}

// handlerTimer records how long the API handler takes per request, inside the server:
// the HTTP latency minus this is the transport (loopback TCP, the HTTP client and
// server stacks).
type handlerTimer struct {
	next http.Handler
	mu   sync.Mutex
	on   bool
	durs []time.Duration
}

func (h *handlerTimer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	h.next.ServeHTTP(w, r)
	d := time.Since(start)
	h.mu.Lock()
	if h.on {
		h.durs = append(h.durs, d)
	}
	h.mu.Unlock()
}

// reset starts or stops recording and returns what was recorded, sorted.
func (h *handlerTimer) reset(on bool) result {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := result{latencies: h.durs}
	slices.Sort(r.latencies)
	h.durs, h.on = nil, on
	return r
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond)) }
