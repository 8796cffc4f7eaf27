package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5" //nolint:depguard // the benchmark counts the store's statements

	"github.com/datajobs/datajobs/internal/gitops"
)

// client calls the in-process server, one call at a time, and counts the statements each
// measured call sent.
type client struct {
	base string
	http *http.Client
	tr   *tracer
	// statements prints the statements of the first repetition's change apply.
	statements bool
}

// apply POSTs file to team's apply (a plan when dry) and checks that the plan has the one
// action want for each of the n jobs.
func (c *client) apply(ctx context.Context, team string, file []byte, dry bool, want string, n int) (sample, error) {
	url := fmt.Sprintf("%s/data-jobs/for-team/%s/apply?dry_run=%v", c.base, team, dry)
	var out struct {
		Summary map[gitops.Action]int `json:"summary"`
		Applied bool                  `json:"applied"`
	}
	c.tr.start()
	t0 := time.Now()
	body, err := c.call(ctx, http.MethodPost, url, file, http.StatusOK)
	s := sample{took: time.Since(t0), stmts: c.tr.stop()}
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return s, fmt.Errorf("decode the plan: %w", err)
	}
	if out.Summary[gitops.Action(want)] != n || len(out.Summary) != 1 {
		return s, fmt.Errorf("the plan is %v, not %d %s", out.Summary, n, want)
	}
	return s, nil
}

// calls makes js's changes through the API, two calls a job: POST .../jobs (create) or PUT
// .../jobs/{job}, then POST .../deployments.
func (c *client) calls(ctx context.Context, team string, js []gitops.Job, create bool) (sample, error) {
	type call struct {
		method, url string
		body        []byte
		status      int
	}
	var all []call
	jobsURL := fmt.Sprintf("%s/data-jobs/for-team/%s/jobs", c.base, team)
	for _, j := range js {
		jb, err := jobBody(team, j)
		if err != nil {
			return sample{}, err
		}
		db, err := deploymentBody(j)
		if err != nil {
			return sample{}, err
		}
		if create {
			all = append(all, call{http.MethodPost, jobsURL, jb, http.StatusCreated})
		} else {
			all = append(all, call{http.MethodPut, jobsURL + "/" + j.JobName, jb, http.StatusOK})
		}
		all = append(all, call{http.MethodPost, jobsURL + "/" + j.JobName + "/deployments", db, http.StatusAccepted})
	}
	c.tr.start()
	t0 := time.Now()
	for _, cl := range all {
		if _, err := c.call(ctx, cl.method, cl.url, cl.body, cl.status); err != nil {
			c.tr.stop()
			return sample{}, err
		}
	}
	return sample{took: time.Since(t0), stmts: c.tr.stop()}, nil
}

// call makes one call and returns its body, an error unless its status is want.
func (c *client) call(ctx context.Context, method, url string, body []byte, want int) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != want {
		return nil, fmt.Errorf("%s %s: status %d: %.500s", method, url, resp.StatusCode, b)
	}
	return b, nil
}

// stmtCount is how many statements the store sent and their round trips' time.
type stmtCount struct {
	n, trips int
	wire     time.Duration
}

// tracer counts the store's statements while on, and their time from sent to answered (a
// pgx tracer; a batch's statements share one round trip, counted once).
type tracer struct {
	on   atomic.Bool
	mu   sync.Mutex
	seen stmtCount
	// byText, when not nil, counts the statements by their text; byTime sums the round
	// trips of the statements sent alone (the COMMIT's among them) by their text.
	byText map[string]int
	byTime map[string]time.Duration
}

type textKey struct{}

type startKey struct{}

func (t *tracer) start() {
	t.mu.Lock()
	t.seen = stmtCount{}
	t.mu.Unlock()
	t.on.Store(true)
}

func (t *tracer) stop() stmtCount {
	t.on.Store(false)
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.seen
}

// TraceQueryStart implements pgx.QueryTracer.
func (t *tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	t.text(d.SQL)
	return context.WithValue(context.WithValue(ctx, textKey{}, d.SQL), startKey{}, time.Now())
}

// TraceQueryEnd implements pgx.QueryTracer.
func (t *tracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	if t0, ok := ctx.Value(startKey{}).(time.Time); ok && t.on.Load() {
		t.mu.Lock()
		if t.byTime != nil {
			t.byTime[ctx.Value(textKey{}).(string)] += time.Since(t0)
		}
		t.mu.Unlock()
	}
	t.ended(ctx, 1)
}

// ended adds the round trip that started ctx and its n statements.
func (t *tracer) ended(ctx context.Context, n int) {
	t0, ok := ctx.Value(startKey{}).(time.Time)
	if !ok || !t.on.Load() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seen.n += n
	t.seen.trips++
	t.seen.wire += time.Since(t0)
}

// TraceBatchStart implements pgx.BatchTracer: a batch's statements go in one round trip.
func (t *tracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return context.WithValue(ctx, startKey{}, time.Now())
}

// TraceBatchQuery implements pgx.BatchTracer.
func (t *tracer) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	if t.on.Load() {
		t.text(d.SQL)
		t.mu.Lock()
		defer t.mu.Unlock()
		t.seen.n++
	}
}

// text counts q when the tracer counts by text.
func (t *tracer) text(q string) {
	if !t.on.Load() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byText != nil {
		t.byText[q]++
	}
}

// TraceBatchEnd implements pgx.BatchTracer.
func (t *tracer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchEndData) {
	t.ended(ctx, 0) // its statements were counted one by one
}
