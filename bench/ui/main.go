// Command ui benchmarks the web console's jobs list (10,000 jobs by default): the server time of a
// page (the handler, in this process, without the network) for the list as it opens, a
// team filter, a name search, a status filter, every sort and the deepest pages, and the
// weight of the page with everything it loads (the HTML, the stylesheet and the scripts).
//
// It seeds a fresh database with -jobs jobs, -deployed of them deployed (bench/internal/seed,
// as bench/graphql), and uses DATAJOBS_TEST_DATABASE_URL when set, else starts its own PostgreSQL.
// With -explain it also gives the server's time of each page's statements (EXPLAIN
// ANALYZE), which depends less on the machine's load than the latencies do.
// docs/benchmarks.md has the results and the command.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5" //nolint:depguard // -explain asks PostgreSQL how it runs the page's statements

	"github.com/datajobs/datajobs/bench/internal/seed"
	"github.com/datajobs/datajobs/bench/internal/sqlcapture"
	"github.com/datajobs/datajobs/bench/internal/stats"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/ui"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/ui:", err)
		os.Exit(1)
	}
}

func run() error {
	var jobs, deployed, requests int
	flag.IntVar(&jobs, "jobs", 10000, "number of jobs")
	flag.IntVar(&deployed, "deployed", 8000, "number of deployed jobs")
	flag.IntVar(&requests, "requests", 300, "requests per scenario (after 20 warm-up requests)")
	explain := flag.Bool("explain", false, "also give EXPLAIN (ANALYZE, BUFFERS) of each page's statements (the median and the least of 5 runs)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()

	dbURL, drop, err := seed.Database(ctx, "bench_ui")
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
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	svc, err := service.New(service.Config{SupportedPythonVersions: []string{"3.9", "3.11"}}, db)
	if err != nil {
		return err
	}
	console, err := ui.New(ui.Config{Logger: slog.New(slog.DiscardHandler)}, svc) // auth mode none: an admin sees all
	if err != nil {
		return err
	}
	// One request without a session gets one; the others carry it, as a browser does.
	first := serve(console, "/ui/", nil)
	cookies := first.Result().Cookies()

	fmt.Printf("%d jobs (%d deployed), GOMAXPROCS=%d, %d requests per row after 20 warm-up, server time (handler, in process), load average %s\n\n",
		jobs, deployed, runtime.GOMAXPROCS(0), requests, stats.LoadAverage())
	defer func() { fmt.Printf("\nload average at the end: %s\n", stats.LoadAverage()) }()
	fmt.Println("| page | p50 | p90 | p99 | HTML bytes | jobs listed |")
	fmt.Println("|---|---|---|---|---|---|")
	listed := regexp.MustCompile(`of (\d+) jobs`)
	var listHTML string
	var explained []string
	for _, sc := range []struct{ name, path string }{
		{"list, first page (50 of all)", "/ui/"},
		{"list, one team", "/ui/?team=team-07"},
		{"list, name search *12*", "/ui/?q=*12*"},
		{"list, sorted by next run", "/ui/?sort=next_run"},
		{"list, sorted by next run, last first", "/ui/?sort=next_run&dir=desc"},
		{"list, sorted by team", "/ui/?sort=team"},
		{"list, sorted by deployment status", "/ui/?sort=status"},
		{"list, sorted by enabled", "/ui/?sort=enabled"},
		{"list, sorted by last run status", "/ui/?sort=last_status"},
		{"list, sorted by last run", "/ui/?sort=last_run&dir=desc"},
		{"list, filtered by status user_error", "/ui/?status=user_error"},
		{"list, page 100, sorted by last run", "/ui/?sort=last_run&dir=desc&page=100"},
		{"list, last page (200), sorted by next run", "/ui/?sort=next_run&page=200"},
		{"list, last page (200), sorted by name", "/ui/?page=200"},
		{"list table, polled by htmx", "/ui/?q=*12*&hx=1"},
	} {
		var headers http.Header
		path := sc.path
		if strings.HasSuffix(path, "&hx=1") {
			path, headers = strings.TrimSuffix(path, "&hx=1"), http.Header{"Hx-Request": {"true"}}
		}
		var lat []time.Duration
		var body string
		for i := range requests + 20 {
			t := time.Now()
			w := serve(console, path, cookies, headers)
			d := time.Since(t)
			if w.Code != http.StatusOK {
				return fmt.Errorf("%s: status %d: %.300s", path, w.Code, w.Body)
			}
			if i >= 20 {
				lat = append(lat, d)
			}
			body = w.Body.String()
		}
		if sc.path == "/ui/" {
			listHTML = body
		}
		n := ""
		if m := listed.FindStringSubmatch(body); m != nil {
			n = m[1]
		}
		q := stats.Percentiles(lat, 50, 90, 99)
		fmt.Printf("| %s | %s | %s | %s | %d | %s |\n", sc.name, ms(q[0]), ms(q[1]), ms(q[2]), len(body), n)
		if *explain {
			tracer.Start()
			serve(console, path, cookies, headers)
			med, least, err := sqlcapture.Explain(ctx, conn, tracer.Stop(), 5)
			if err != nil {
				return fmt.Errorf("%s: %w", sc.name, err)
			}
			explained = append(explained, fmt.Sprintf("| %s | %d | %s + %s | %s + %s | %d |", sc.name, med.Statements,
				ms(med.Planning), ms(med.Execution), ms(least.Planning), ms(least.Execution), med.SharedHit+med.SharedRd))
		}
	}
	if *explain {
		fmt.Printf("\nEXPLAIN (ANALYZE, BUFFERS) of each page's statements, added up (5 runs), load average %s:\n\n", stats.LoadAverage())
		fmt.Println("| page | statements | median: planning + execution | least: planning + execution | shared buffers |\n|---|---|---|---|---|")
		fmt.Println(strings.Join(explained, "\n"))
	}

	// The page's weight: the HTML and everything it loads.
	total := len(listHTML)
	fmt.Printf("\nweight of /ui/ with everything it loads:\n\n| resource | bytes |\n|---|---|\n| HTML | %d |\n", len(listHTML))
	for _, m := range regexp.MustCompile(`(?:src|href)="(/ui/static/[^"]+)"`).FindAllStringSubmatch(listHTML, -1) {
		w := serve(console, m[1], cookies)
		if w.Code != http.StatusOK {
			return fmt.Errorf("%s: status %d", m[1], w.Code)
		}
		total += w.Body.Len()
		fmt.Printf("| %s | %d |\n", m[1], w.Body.Len())
	}
	fmt.Printf("| **total** | **%d** (%.0f KB) |\n", total, float64(total)/1024)
	return nil
}

func serve(h http.Handler, path string, cookies []*http.Cookie, headers ...http.Header) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	for _, c := range cookies {
		r.AddCookie(c)
	}
	for _, hs := range headers {
		for k, v := range hs {
			r.Header[k] = v
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
