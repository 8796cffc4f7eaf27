package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/datajobs/datajobs/bench/internal/stats"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/tracker"
)

// probe splits the tracker's part of a latency (run committed -> Job seen) where it goes:
// when the tracker first read each execution's row (the reconcile of its start began:
// before it, the run waited in the tracker's queue), when the apiserver answered the
// create of its Job, and what each request of the tracker's client and each of its
// start's writes took.
type probe struct {
	mu      sync.Mutex
	loaded  map[string]time.Time
	created map[string]time.Time
	reqs    map[string][]time.Duration // by "VERB resource"
	marks   []time.Duration            // MarkExecutionJobCreated
	// reg holds the tracker's and the firer's metrics; last their values at the last
	// report.
	reg  *prometheus.Registry
	last map[string]float64
	// pool times the database pool's acquires (pool.go).
	pool *acquires
}

func newProbe() *probe {
	return &probe{
		loaded: map[string]time.Time{}, created: map[string]time.Time{}, reqs: map[string][]time.Duration{},
		reg: prometheus.NewRegistry(), last: map[string]float64{}, pool: &acquires{},
	}
}

// first notes id at now in m unless noted before.
func (p *probe) first(m map[string]time.Time, id string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := m[id]; !ok {
		m[id] = now
	}
}

// client returns a client of kubeconfig (the benchmark's rate limit) whose requests p
// times, and notes each Job's create answered.
func (p *probe) client(kubeconfig string) (kubernetes.Interface, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	rc.QPS, rc.Burst = 2000, 4000
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return timed{rt: rt, p: p} })
	return kubernetes.NewForConfig(rc)
}

// timed is a RoundTripper that times each request by verb and resource.
type timed struct {
	rt http.RoundTripper
	p  *probe
}

func (t timed) RoundTrip(req *http.Request) (*http.Response, error) {
	var name string
	resource := resourceOf(req.URL.Path)
	if req.Method == http.MethodPost && resource == "jobs" && req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(b))
		// Built-in kinds go as protobuf (client-go forces it): decode either way.
		if obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(b, nil, nil); err == nil {
			if j, ok := obj.(*batchv1.Job); ok {
				name = j.Name
			}
		}
	}
	watching := req.URL.Query().Get("watch") == "true"
	t0 := time.Now()
	resp, err := t.rt.RoundTrip(req)
	if watching {
		return resp, err
	}
	now := time.Now()
	t.p.mu.Lock()
	defer t.p.mu.Unlock()
	key := req.Method + " " + resource
	t.p.reqs[key] = append(t.p.reqs[key], now.Sub(t0))
	if name != "" && err == nil && resp.StatusCode == http.StatusCreated {
		t.p.created[name] = now
	}
	return resp, err
}

// resourceOf is the resource of an API path: the segment after "namespaces/<ns>/", else
// the last one.
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i, s := range parts {
		if s == "namespaces" && i+2 < len(parts) {
			return parts[i+2]
		}
	}
	return parts[len(parts)-1]
}

// store returns db as the tracker sees it, its row reads and Job marks noted.
func (p *probe) store(db tracker.Store) tracker.Store { return probedStore{Store: db, p: p} }

type probedStore struct {
	tracker.Store
	p *probe
}

func (s probedStore) LoadExecution(ctx context.Context, id string) (job.TrackedExecution, bool, error) {
	s.p.first(s.p.loaded, id, time.Now())
	return s.Store.LoadExecution(ctx, id)
}

func (s probedStore) MarkExecutionJobCreated(ctx context.Context, fence job.Fence, id string) (bool, error) {
	t0 := time.Now()
	ok, err := s.Store.MarkExecutionJobCreated(ctx, fence, id)
	s.p.mu.Lock()
	s.p.marks = append(s.p.marks, time.Since(t0))
	s.p.mu.Unlock()
	return ok, err
}

// report prints, for the executions ids (committed at committed[id], seen at seen[id]),
// the split of committed -> Job seen: queued (committed -> row read), started (row read
// -> create answered), watched (create answered -> seen), and the requests' times.
func (p *probe) report(title string, ids []string, committed, seen func(string) (time.Time, bool)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var queued, started, watched []time.Duration
	for _, id := range ids {
		c, ok1 := committed(id)
		s, ok2 := seen(id)
		l, ok3 := p.loaded[id]
		cr, ok4 := p.created[id]
		if !ok1 || !ok2 || !ok3 || !ok4 {
			continue
		}
		queued = append(queued, l.Sub(c))
		started = append(started, cr.Sub(l))
		watched = append(watched, s.Sub(cr))
	}
	fmt.Printf("  %s, the tracker's part split (%d runs):\n", title, len(queued))
	fmt.Printf("    committed -> row read (the tracker's queue): %s\n", stats.Summary(queued))
	fmt.Printf("    row read -> Job create answered (the start):  %s\n", stats.Summary(started))
	fmt.Printf("    create answered -> Job seen (the watch):      %s\n", stats.Summary(watched))
	fmt.Printf("    mark Job created (DB):                        %s\n", stats.Summary(p.marks))
	waits := p.pool.take()
	fmt.Printf("    database pool, wait for a connection:         %d acquires, %s\n", len(waits), stats.Summary(waits))
	for _, k := range slices.Sorted(maps.Keys(p.reqs)) {
		fmt.Printf("    tracker's %-28s %6d requests: %s\n", k, len(p.reqs[k]), stats.Summary(p.reqs[k]))
	}
	p.marks, p.reqs = nil, map[string][]time.Duration{}
	p.queue()
}

// queue prints what the tracker's queue did since the last report (keys added,
// reconciles and their mean wait and work, status writes), and the firer's.
func (p *probe) queue() {
	now := p.gather()
	d := func(name string) float64 { return now[name] - p.last[name] }
	mean := func(name string) time.Duration {
		if d(name+"_count") == 0 {
			return 0
		}
		return time.Duration(d(name+"_sum") / d(name+"_count") * float64(time.Second))
	}
	const q = "datajobs_executions_queue"
	fmt.Printf("    tracker's queue: %.0f keys added, %.0f reconciles, mean wait %s, mean work %s; %.0f status writes\n",
		d(q+"_adds_total"), d(q+"_work_duration_seconds_count"), mean(q+"_latency_seconds"), mean(q+"_work_duration_seconds"),
		d("datajobs_execution_status_write_lag_seconds_count"))
	const fq = "datajobs_trigger_queue"
	if d(fq+"_work_duration_seconds_count") > 0 {
		fmt.Printf("    firer's queue: %.0f reconciles, mean wait %s, mean work %s\n",
			d(fq+"_work_duration_seconds_count"), mean(fq+"_latency_seconds"), mean(fq+"_work_duration_seconds"))
	}
	p.last = now
}

// gather reads the tracker's counters and histograms' sums and counts, by name.
func (p *probe) gather() map[string]float64 {
	now := map[string]float64{}
	fams, err := p.reg.Gather()
	if err != nil {
		return now
	}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				now[f.GetName()] += m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				now[f.GetName()+"_sum"] += m.GetHistogram().GetSampleSum()
				now[f.GetName()+"_count"] += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return now
}

// reset forgets the requests and marks timed so far.
func (p *probe) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.marks, p.reqs = nil, map[string][]time.Duration{}
	p.pool.take()
	p.last = p.gather()
}

// profile writes a CPU profile of the process to path until the returned stop is called
// (nothing when path is empty).
func profile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}
