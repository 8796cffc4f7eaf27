package server_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/server"
	"github.com/datajobs/datajobs/internal/testenv"
)

// jobsQuery is a GraphQL jobs query that reads the data_job table (its total).
var jobsQuery = "/data-jobs/for-team/team-a/jobs?" + url.Values{"query": {"{ jobs(pageNumber: 1, pageSize: 10) { totalItems } }"}}.Encode()

// answer is what a GraphQL client saw.
type answer struct {
	status     int
	retryAfter string
	body       string
}

func query(t *testing.T, client *http.Client, base string) answer {
	t.Helper()
	resp, err := client.Get(base + jobsQuery)
	if err != nil {
		return answer{body: err.Error()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), body: string(b)}
}

// metric is the value of the sample of /metrics whose line starts with series, 0 if none.
func metric(t *testing.T, admin, series string) float64 {
	t.Helper()
	_, body := get(t, admin+"/metrics")
	for line := range strings.Lines(body) {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			require.NoError(t, err, line)
			return v
		}
	}
	return 0
}

// patient is a pool of conns connections (0: the default) whose statements may wait for
// the test's lock for as long as the test runs.
func patient(conns int32) server.SafetyConfig {
	return server.SafetyConfig{DBMaxConns: conns, DBStatementTimeout: 2 * time.Minute}
}

// burst sends n GraphQL queries at once and returns a channel of their answers.
func burst(t *testing.T, client *http.Client, base string, n int) <-chan answer {
	out := make(chan answer, n)
	for range n {
		go func() { out <- query(t, client, base) }()
	}
	return out
}

// Issue 28: with --max-concurrent-graphql 8, the 9th query in progress at once was refused
// with 429, so a console or a script sending 16 queries of 100 ms at once failed half of
// them. Now the 8 past the limit wait for a slot (as many may wait as may run) and every
// one of the 16 succeeds; only a 17th, with the queue full, is refused, at once, with
// Retry-After and a message naming the flag. Here the queries are held by a lock on the
// jobs table (a slow database) until all 16 are in; the 17th's answer arrives while the
// lock is still held, so it did not wait for a slot.
func TestABurstOfTwiceTheGraphQLLimitWaitsInsteadOfFailing(t *testing.T) {
	t.Parallel()
	dbURL := testenv.DatabaseURL(t)
	base, _, admin := serve(t, server.Config{
		DatabaseURL: dbURL, SyncMode: server.SyncOff, Safety: patient(24),
		Requests: server.RequestLimits{MaxConcurrentGraphQL: 8, AdmissionWait: time.Minute, GraphQLTimeout: 2 * time.Minute},
	})
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 64}, Timeout: 2 * time.Minute}
	defer client.CloseIdleConnections()
	require.Equal(t, http.StatusOK, query(t, client, base).status, "the schema is there")

	tx := holdJobTable(t, dbURL)
	answers := burst(t, client, base, 16)
	require.Eventually(t, func() bool {
		return metric(t, admin, `datajobs_admission_queued_requests{kind="graphql"}`) == 8
	}, time.Minute, 20*time.Millisecond, "8 queries run (held by the lock), 8 wait for a slot")

	refused := query(t, client, base)
	require.Equal(t, http.StatusTooManyRequests, refused.status, "%s", refused.body)
	require.Equal(t, "2", refused.retryAfter)
	require.Contains(t, refused.body, "--max-concurrent-graphql")
	require.Contains(t, refused.body, "already did", "the queue was full: it did not wait")

	require.NoError(t, tx.Rollback(t.Context()))
	for range 16 {
		a := <-answers
		require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	}
	require.InDelta(t, 8, metric(t, admin, `datajobs_admission_wait_seconds_count{admitted="true",kind="graphql"}`), 0, "8 waited and got a slot")
	require.InDelta(t, 1, metric(t, admin, `datajobs_admission_refusals_total{kind="graphql",reason="queue_full"}`), 0)
	require.Zero(t, metric(t, admin, `datajobs_admission_queued_requests{kind="graphql"}`))
}

// The other side of the queue: a sustained overload is still refused, and quickly. With
// both slots held (the lock) and 32 clients sending queries in a loop, every one of them is
// answered 429 while the slots are still held: a query waits at most --admission-wait
// (200 ms here), and no more than the limit (2) wait at once, so the waits that ran out
// number at most 2 per 200 ms of the overload, however many clients there are; the rest
// are refused without waiting. Once the slots are free, queries succeed again.
func TestASustainedGraphQLOverloadIsRefusedQuicklyWithABoundedQueue(t *testing.T) {
	t.Parallel()
	dbURL := testenv.DatabaseURL(t)
	const wait = 200 * time.Millisecond
	base, _, admin := serve(t, server.Config{
		DatabaseURL: dbURL, SyncMode: server.SyncOff, Safety: patient(0),
		Requests: server.RequestLimits{MaxConcurrentGraphQL: 2, AdmissionWait: wait, GraphQLTimeout: 2 * time.Minute},
	})
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 64}, Timeout: 2 * time.Minute}
	defer client.CloseIdleConnections()
	require.Equal(t, http.StatusOK, query(t, client, base).status)

	tx := holdJobTable(t, dbURL)
	held := burst(t, client, base, 2)
	watch, err := pgx.Connect(t.Context(), dbURL) // the lock's transaction sees one snapshot
	require.NoError(t, err)
	defer watch.Close(context.Background())
	require.Eventually(t, func() bool {
		var waiting int
		err := watch.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`).Scan(&waiting)
		return err == nil && waiting == 2
	}, time.Minute, 20*time.Millisecond, "both slots are held, by queries waiting for the lock")
	before := metric(t, admin, `datajobs_admission_refusals_total{kind="graphql",reason="wait_over"}`)

	start := time.Now()
	var (
		mu    sync.Mutex
		codes = map[int]int{}
		wg    sync.WaitGroup
	)
	for range 32 {
		wg.Go(func() {
			for range 10 {
				a := query(t, client, base)
				mu.Lock()
				codes[a.status]++
				mu.Unlock()
				if a.status == http.StatusTooManyRequests && a.retryAfter != "2" {
					t.Errorf("a refusal without Retry-After: %q", a.retryAfter)
				}
			}
		})
	}
	wg.Wait()
	overload := time.Since(start)
	require.Equal(t, map[int]int{http.StatusTooManyRequests: 320}, codes, "every query refused while the slots are held")
	waitedOut := metric(t, admin, `datajobs_admission_refusals_total{kind="graphql",reason="wait_over"}`) - before
	require.Positive(t, waitedOut, "some waited for a slot")
	require.LessOrEqual(t, waitedOut, 2*(float64(overload/wait)+1), "at most 2 waited at once, %s each", wait)
	require.Zero(t, metric(t, admin, `datajobs_admission_queued_requests{kind="graphql"}`), "nobody is left waiting")

	require.NoError(t, tx.Rollback(t.Context()))
	for range 2 {
		a := <-held
		require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	}
	require.Equal(t, http.StatusOK, query(t, client, base).status, "the slots are free again")
}
