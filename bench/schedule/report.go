package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// report prints the runs' latencies, the missed runs, the lateness events and the write
// rates of one burst.
func (e *env) report(ctx context.Context, names []string, writes *writeSampler, skewBefore []bucket, deadline time.Duration) error {
	fmt.Printf("schedule time -> Job created:          %s\n", summary(e.created.since()))
	fmt.Printf("schedule time -> pod Running:          %s\n", summary(e.running.since()))
	fmt.Printf("schedule time -> execution running:    %s\n", summary(e.recorded.since()))
	var skipped, late, falseLate int
	err := e.Conn.QueryRow(ctx, `SELECT count(*) FROM data_job_execution WHERE status = 'skipped'`).Scan(&skipped)
	if err != nil {
		return fmt.Errorf("count skipped runs: %w", err)
	}
	// A job_late event is false when its run started within its starting deadline.
	err = e.Conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE EXISTS (
	SELECT 1 FROM data_job_execution x WHERE x.job_name = ev.job_name AND x.type = 'scheduled' AND x.status NOT IN ('submitted', 'skipped')
		AND x.start_time <= (ev.payload->>'schedule_time')::timestamptz + make_interval(secs => $1)))
FROM notification_event ev WHERE ev.kind = 'job_late'`, deadline.Seconds()).Scan(&late, &falseLate)
	if err != nil {
		return fmt.Errorf("count lateness events: %w", err)
	}
	fmt.Printf("runs: %d of %d Jobs created, %d recorded running; missed: %d without a Job, %d recorded skipped\n",
		e.created.len(), len(names), e.recorded.len(), len(names)-e.created.len(), skipped)
	fmt.Printf("job_late events: %d (false, the run started within its %s deadline: %d)\n", late, deadline, falseLate)
	fmt.Printf("apiserver writes (POST, PUT, PATCH, DELETE): %s\n", writes.summary())
	skew, err := skewBuckets(ctx, e.kubeconfig)
	if err != nil || skewBefore == nil {
		fmt.Printf("CronJob controller skew: not read (%v)\n", err)
	} else {
		fmt.Printf("CronJob controller skew (kube-controller-manager's cronjob_controller_job_creation_skew_duration_seconds): %s\n", skewSince(skewBefore, skew))
	}
	return nil
}

// writeSampler samples the apiserver's count of write requests.
type writeSampler struct {
	client  kubernetes.Interface
	mu      sync.Mutex
	first   float64
	last    float64
	firstAt time.Time
	lastAt  time.Time
	peak    float64 // writes per second over the busiest sample period
}

func newWriteSampler(c kubernetes.Interface) *writeSampler { return &writeSampler{client: c} }

// start samples every period until the returned stop is called.
func (w *writeSampler) start(ctx context.Context, period time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			if n, err := w.writes(ctx); err == nil {
				w.note(n, time.Now())
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(period):
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
	}
}

func (w *writeSampler) note(n float64, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.firstAt.IsZero() {
		w.first, w.firstAt = n, at
	} else if d := at.Sub(w.lastAt).Seconds(); d > 0 {
		w.peak = max(w.peak, (n-w.last)/d)
	}
	w.last, w.lastAt = n, at
}

func (w *writeSampler) summary() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	d := w.lastAt.Sub(w.firstAt).Seconds()
	if d <= 0 {
		return "not sampled"
	}
	return fmt.Sprintf("%.0f in %.0f s, %.1f/s on average, %.1f/s at the busiest 2 s", w.last-w.first, d, (w.last-w.first)/d, w.peak)
}

// writes is the apiserver's apiserver_request_total summed over its write verbs.
func (w *writeSampler) writes(ctx context.Context) (float64, error) {
	b, err := w.client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, err
	}
	var sum float64
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		for _, verb := range []string{`verb="POST"`, `verb="PUT"`, `verb="PATCH"`, `verb="DELETE"`} {
			if strings.Contains(line, verb) {
				sum += sampleValue(line)
			}
		}
	}
	return sum, sc.Err()
}

func sampleValue(line string) float64 {
	f := strings.Fields(line)
	v, _ := strconv.ParseFloat(f[len(f)-1], 64)
	return v
}

// skewBuckets reads kube-controller-manager's histogram of how late the CronJob controller
// created Jobs (cumulative counts per upper bound, "+Inf" last), from its secure port
// (ports.json beside the kubeconfig, as `datajobs dev` writes it), as the kubeconfig's user.
func skewBuckets(ctx context.Context, kubeconfig string) ([]bucket, error) {
	b, err := os.ReadFile(filepath.Join(filepath.Dir(kubeconfig), "ports.json"))
	if err != nil {
		return nil, err
	}
	var ports struct {
		ControllerManager int `json:"controller_manager"`
	}
	if err := json.Unmarshal(b, &ports); err != nil {
		return nil, err
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	rc.Insecure, rc.CAData, rc.CAFile = true, nil, "" // the controller manager's serving certificate is not the apiserver's
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		return nil, err
	}
	req, err := newGet(ctx, fmt.Sprintf("https://127.0.0.1:%d/metrics", ports.ControllerManager))
	if err != nil {
		return nil, err
	}
	res, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	var out []bucket
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "cronjob_controller_job_creation_skew_duration_seconds_bucket{") {
			le := line[strings.Index(line, `le="`)+4:]
			out = append(out, bucket{le: le[:strings.IndexByte(le, '"')], n: sampleValue(line)})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("status %s, no skew histogram", res.Status)
	}
	return out, sc.Err()
}

// bucket is one cumulative bucket of a histogram.
type bucket struct {
	le string
	n  float64
}

// skewSince is the histogram's Jobs since before (a read at the burst's start): their
// number and how many were created within each bound.
func skewSince(before, after []bucket) string {
	counts := map[string]float64{}
	for _, b := range before {
		counts[b.le] = b.n
	}
	var parts []string
	total := 0.0
	for _, b := range after {
		n := b.n - counts[b.le]
		if b.le == "+Inf" {
			total = n
			continue
		}
		parts = append(parts, "≤"+b.le+" s: "+strconv.FormatFloat(n, 'f', 0, 64))
	}
	return strconv.FormatFloat(total, 'f', 0, 64) + " Jobs created, cumulative " + strings.Join(parts, ", ")
}
