package graphapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/graphapi"
	"github.com/datajobs/datajobs/internal/slots"
)

// Attack (issue 22, item 3): parsing and validation ran before any bound, on documents of
// up to 64 KiB: one such query cost seconds of CPU. A document longer than
// MaxQueryBytes (8 KiB by default) is refused before the parser sees it.
func TestAQueryOverTheByteLimitIsRefusedBeforeItIsParsed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	q := "{ jobs { totalItems } }\n# " + strings.Repeat("x", 9<<10)
	e.stmts.take()
	msg := e.query(q, "").errorMessage(t, http.StatusBadRequest)
	require.Contains(t, msg, "more than the maximum of 8192 (--graphql-max-query-bytes); it was not parsed")
	require.Empty(t, e.stmts.take(), "no database work")
	require.Equal(t, http.StatusOK, e.query("{ jobs { totalItems } }\n# "+strings.Repeat("x", 7<<10), "").status, "a query under the limit runs")
}

// Attack: many tiny tokens within the byte limit (`{a a a ...}`) are what the parser and
// the validator spend their time on; the parser stops at its token limit.
func TestTheParserStopsAtItsTokenLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	q := "{" + strings.Repeat(" a", 3000) + " }"
	require.Less(t, len(q), 8<<10)
	require.Contains(t, e.query(q, "").errorMessage(t, http.StatusBadRequest), "exceeded token limit of 2000")
	require.Equal(t, http.StatusOK, e.query(introspectionQuery, "").status, "the standard introspection query is well within it")
}

// Attack: each distinct validated document stayed in a cache of 1,000 entries, about 1 MiB
// each for large ones: a thousand distinct queries exceeded the chart's memory limit. The
// cache is bounded by bytes, and a document the bounds refuse is never kept.
func TestTheDocumentCacheKeepsOnlyBoundedDocumentsWithinItsBytes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *options) { o.cfg.CacheBytes = 256 << 10 })
	deep := `{ __type(name: "DataJob") { ` + strings.Repeat(`ofType { `, 30) + `name` + strings.Repeat(` }`, 30) + ` } }`
	for i := range 5 {
		e.query(deep+fmt.Sprintf(" # %d", i), "").errorMessage(t, http.StatusBadRequest)
	}
	n, _ := graphapi.CachedDocuments(e.gql)
	require.Zero(t, n, "documents refused by the bounds are not kept")

	pad := strings.Repeat("x", 4<<10)
	for i := range 100 {
		r := e.query(fmt.Sprintf("{ jobs { totalItems } } # %d %s", i, pad), "")
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	}
	n, bytes := graphapi.CachedDocuments(e.gql)
	require.LessOrEqual(t, bytes, 256<<10, "the estimated bytes stay within CacheBytes")
	require.Positive(t, n)
	require.Less(t, n, 100, "the least recently used documents were let go")
}

// Attack: a flood of GraphQL queries took every CPU and connection from the REST API.
// GraphQL has slots of its own; past them a query waits for one (here briefly), then is
// refused with 429, and the REST API still answers.
func TestGraphQLHasItsOwnConcurrencySlots(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *options) {
		o.cfg.MaxConcurrent, o.cfg.Admission = 1, slots.Queue{Wait: 100 * time.Millisecond}
	})
	conn, err := pgx.Connect(t.Context(), e.dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	tx, err := conn.Begin(t.Context())
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	_, err = tx.Exec(t.Context(), `LOCK TABLE data_job IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)

	held := make(chan response, 1)
	go func() { held <- e.query(`{ jobs { totalItems } }`, "") }() // waits behind the lock
	// Polled on another connection: inside the lock's transaction the statistics views
	// show one snapshot.
	watch, err := pgx.Connect(t.Context(), e.dbURL)
	require.NoError(t, err)
	defer watch.Close(context.Background())
	require.Eventually(t, func() bool {
		var waiting int
		err := watch.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`).Scan(&waiting)
		return err == nil && waiting >= 1
	}, 30*time.Second, 20*time.Millisecond)

	r := e.query(`{ jobs { totalItems } }`, "")
	require.Contains(t, r.errorMessage(t, http.StatusTooManyRequests), "--max-concurrent-graphql")
	require.Equal(t, http.StatusOK, e.get("/data-jobs/for-team/team-a/info").status, "the REST API is not held up")

	require.NoError(t, tx.Rollback(t.Context()))
	require.Equal(t, http.StatusOK, (<-held).status)
	require.Equal(t, http.StatusOK, e.query(`{ jobs { totalItems } }`, "").status, "the slot is free again")
}

// --graphql-timeout bounds parsing and validation too: gqlparser does not watch a
// deadline, so before, a document was parsed and validated to the end however long that
// took. With the deadline already past, even a document that is no GraphQL answers 503.
func TestTheTimeoutCoversParsingAndValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *options) { o.cfg.Timeout = time.Nanosecond })
	for _, q := range []string{`{ jobs { totalItems }`, `{ noSuchField }`} {
		require.Contains(t, e.query(q, "").errorMessage(t, http.StatusServiceUnavailable), "did not complete in time")
	}
}

// Attack: validation compares the fields of one selection set pairwise, so 1,000 fields
// in 8 KiB cost 53-117 ms of CPU before any bound judged them. A selection set wider than
// MaxWidth (100), its fragments spread into it, is refused before validation.
func TestAWideSelectionSetIsRefusedBeforeValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	wide := "{ jobs { content {" + strings.Repeat(" jobName", 150) + " } } }"
	require.Contains(t, e.query(wide, "").errorMessage(t, http.StatusBadRequest), "more than 100 fields")
	spread := "{ jobs { content { ...A ...B } } }\nfragment A on DataJob {" + strings.Repeat(" jobName", 60) +
		" }\nfragment B on DataJob {" + strings.Repeat(" jobName", 60) + " }"
	require.Contains(t, e.query(spread, "").errorMessage(t, http.StatusBadRequest), "more than 100 fields", "fragments spread flat")
	require.Equal(t, http.StatusOK, e.query("{ jobs { content {"+strings.Repeat(" jobName", 100)+" } } }", "").status)
}

// TestTheRowsOfARequestAreBounded: pages of up to MaxPageSize, several root fields and a
// deployment's executions per job of a page add up; past MaxRows the query is refused
// before the read that would pass it, whatever the page sizes.
func TestTheRowsOfARequestAreBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *options) { o.cfg.MaxPageSize, o.cfg.MaxRows = 100, 200 })
	seed(e)
	seedExecutions(e)
	const nested = `{ jobs(pageSize: %d) { content { deployments { executions(pageNumber: 1, pageSize: %d) { id } } } } }`
	require.Equal(t, http.StatusOK, e.query(fmt.Sprintf(nested, 100, 20), "").status, "a page of 100, and 20 executions of each of its 5 jobs")

	e.stmts.take()
	msg := e.query(fmt.Sprintf(nested, 100, 30), "").errorMessage(t, http.StatusBadRequest)
	require.Contains(t, msg, "The query could answer up to 250 rows, more than the maximum of 200.")
	require.Contains(t, msg, "the executions of a page of jobs: 150")
	for _, s := range e.stmts.take() {
		require.NotContains(t, s, "data_job_execution", "the executions are not read")
	}

	msg = e.query(`{ a: jobs(pageSize: 100) { totalItems } b: executions(pageNumber: 1, pageSize: 100) { totalItems } c: jobs(pageSize: 1) { totalItems } }`, "").
		errorMessage(t, http.StatusBadRequest)
	require.Contains(t, msg, "up to 201 rows", "root fields add up")
	require.Equal(t, http.StatusOK, e.query(`{ a: jobs(pageSize: 100) { totalItems } b: executions(pageNumber: 1, pageSize: 100) { totalItems } }`, "").status)

	_, err := graphapi.New(graphapi.Config{MaxPageSize: 1000, MaxRows: 999}, nil)
	require.ErrorContains(t, err, "max rows (999) must be at least the max page size (1000)")
}
