// Package graphapi serves VDK's GraphQL queries over data jobs and their executions, the
// jobs query that `vdk list` and the VDK UI use, from the database only. It answers in
// VDK's REST envelope {"data": {content, totalPages, totalItems}, "errors": [...]}.
//
// It is thin on purpose: the root resolvers turn the arguments and the selection set into
// one store query per page (filters, search, sort and paging pushed down into SQL, the
// deployments joined in), and gqlgen's generated executor (package gql) parses, validates
// and caches the documents, coerces the arguments, calls the resolvers and writes the
// answer. The executions of a page's deployments are read by a loader, once per page.
package graphapi

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/executor"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/datajobs/datajobs/internal/graphapi/gql"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/slots"
)

//go:generate go run github.com/99designs/gqlgen@v0.17.98 generate

// defaultQuery is what VDK runs when a request brings no query: the first 20 jobs with
// their names and teams.
const defaultQuery = `{ jobs(pageNumber: 1, pageSize: 20) { content { jobName config { team } } totalPages totalItems } }`

// Reader is what the queries read (service.Service implements it).
type Reader interface {
	ListJobs(ctx context.Context, r job.ListRequest) (job.ListPage, error)
	ExecutionsPage(ctx context.Context, q job.ExecutionsQuery) (job.ExecutionsPage, error)
	ExecutionsOfJobs(ctx context.Context, names []string, q job.ExecutionsQuery) (map[string][]job.Execution, error)
	ExecutionCounts(ctx context.Context, names []string) (map[string]job.ExecutionCount, error)
	// Teams lists the teams that own jobs (asked only with a Webhook, for an admin).
	Teams(ctx context.Context) ([]string, error)
}

// The defaults of Config that the flags of `datajobs serve` use too.
const (
	DefaultMaxQueryBytes = 8 << 10
	DefaultMaxConcurrent = 8
	DefaultTimeout       = 10 * time.Second
)

// Config configures the GraphQL handler.
type Config struct {
	// MaxPageSize is the largest pageSize a query may ask for; larger ones are refused
	// with 400 rather than silently cut, so that a client paging until a short page never
	// stops early (default 1000: VDK's Operations UI reads every job in pages of 1000 and
	// executions in pages of 500; `vdk list` asks for 100).
	MaxPageSize int
	// MaxRows caps the rows one request may answer in all: each page counts its
	// pageSize, a deployment's executions the jobs of the page times their pageSize
	// (default 20,000; VDK's clients need at most 10,100: `vdk list`'s 100 jobs with 100
	// executions each). Over it the query is refused with 400 before the read that would
	// pass it, so page sizes of 1000 cannot multiply into millions of rows in memory.
	MaxRows int
	// DefaultResources fill the resources a deployment leaves unset, as the REST API
	// shows them (pass service.Config().Resources.Default). Zero fields show as 0.
	DefaultResources job.Resources
	// MaxExecutionTimeout is the installation's bound of timeout_seconds (see
	// job.DefaultTimeout): below 12 h it is the timeout shown of a policy that sets none.
	MaxExecutionTimeout time.Duration
	// SourceURLTemplate makes config.sourceUrl: {job} and {team} are replaced, e.g.
	// "https://git.example.com/data-jobs/tree/main/{job}". Empty: sourceUrl is null.
	SourceURLTemplate string
	// LogsURLTemplate makes logsUrl: {job}, {team} and {execution} are replaced (team is
	// empty for executions, execution for jobs). Empty: logsUrl is null.
	LogsURLTemplate string
	// MaxBodyBytes caps POST bodies (default 64 KiB: a document of MaxQueryBytes and its
	// variables).
	MaxBodyBytes int64
	// MaxQueryBytes caps the GraphQL document; a longer one is refused before it is parsed
	// (default 8 KiB; VDK's queries are under 1 KiB, the standard introspection query
	// under 2). Parsing and validating cost CPU and memory in proportion to the text (a 64
	// KiB query took seconds), and happen before any other bound can judge the document.
	MaxQueryBytes int
	// MaxTokens caps the tokens the parser reads (default 2000; the standard
	// introspection query has about 330), so that a document of many tiny tokens within
	// MaxQueryBytes is refused as soon as the parser reaches the limit.
	MaxTokens int
	// CacheBytes bounds the memory of the parsed documents kept across requests, estimated
	// from their length (default 16 MiB). Only documents that passed every bound are kept.
	CacheBytes int
	// MaxConcurrent caps the GraphQL requests in progress (parsing included), so that
	// queries cannot take every CPU from the REST API (default 8); more wait for a slot as
	// Admission says, then are refused with 429 and Retry-After.
	MaxConcurrent int
	// Admission is how a request waits for a slot when all are in use (package slots;
	// default: up to slots.DefaultWait, as many waiting as may run).
	Admission slots.Queue
	// Webhook, when set, is asked about every team whose rows an answer would hold
	// (read permission on GET /data-jobs/for-team/{team}/jobs): a team it denies is left
	// out of a member's answer, and an admin's answer holding one is refused with 403.
	Webhook Authorizer
	// MaxDepth caps the nesting of fields of a document, introspection fields included
	// (default 15: VDK's queries need 5, the deepest document of the schema 7, the
	// standard introspection query 13). Each fragment is walked once.
	MaxDepth int
	// MaxComplexity caps the fields a document selects once its fragments are expanded,
	// checked first in one walk of each fragment, then by gqlgen's complexity limit
	// (default 1000; every field of the schema, nested, is about 150).
	MaxComplexity int
	// MaxWidth caps the fields of one selection set, its fragments spread into it, checked
	// before validation, whose cost grows with the square of it (default 100; VDK's widest
	// set has about 15, the standard introspection query's 8).
	MaxWidth int
	// MaxRootFields caps the root fields of a document, aliases included: each one is a
	// query of its own (default 5; VDK sends 1).
	MaxRootFields int
	// Timeout bounds each request, parsing and validation included (default 10s); past it
	// the answer is 503.
	Timeout time.Duration
	// DisableIntrospection refuses __schema and __type queries (introspection is on by
	// default: the VDK UI and GraphQL tools use it).
	DisableIntrospection bool
	// Now is the clock of nextRunEpochSeconds (default time.Now).
	Now func() time.Time
	// Logger receives failures that are not the client's (default slog.Default()).
	Logger *slog.Logger
}

// Handler serves the GraphQL queries: GET with the query, variables and operation_name
// parameters, as VDK's REST endpoint takes them, or POST with a JSON body
// {query, variables, operationName}.
type Handler struct {
	cfg      Config
	schema   graphql.ExecutableSchema
	exec     *executor.Executor
	resolver *resolver
	props    map[string]property
	// schedules keeps parsed cron schedules across requests, for nextRunEpochSeconds.
	schedules job.Schedules
	// cache keeps the documents that passed every bound.
	cache *docCache
	// slots admits MaxConcurrent requests at once.
	slots *slots.Slots
}

// New returns the handler of the jobs and executions queries, reading from r.
func New(cfg Config, r Reader) (*Handler, error) {
	cfg.MaxPageSize = cmp.Or(cfg.MaxPageSize, 1000)
	cfg.MaxRows = cmp.Or(cfg.MaxRows, 20000)
	cfg.MaxBodyBytes = cmp.Or(cfg.MaxBodyBytes, 64<<10)
	cfg.MaxQueryBytes = cmp.Or(cfg.MaxQueryBytes, DefaultMaxQueryBytes)
	cfg.MaxTokens = cmp.Or(cfg.MaxTokens, 2000)
	cfg.CacheBytes = cmp.Or(cfg.CacheBytes, 16<<20)
	cfg.MaxConcurrent = cmp.Or(cfg.MaxConcurrent, DefaultMaxConcurrent)
	cfg.MaxWidth = cmp.Or(cfg.MaxWidth, 100)
	cfg.MaxDepth = cmp.Or(cfg.MaxDepth, 15)
	cfg.MaxComplexity = cmp.Or(cfg.MaxComplexity, 1000)
	cfg.MaxRootFields = cmp.Or(cfg.MaxRootFields, 5)
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxPageSize < 1 {
		return nil, fmt.Errorf("graphql: max page size must be positive, not %d", cfg.MaxPageSize)
	}
	if cfg.MaxRows < cfg.MaxPageSize {
		return nil, fmt.Errorf("graphql: max rows (%d) must be at least the max page size (%d)", cfg.MaxRows, cfg.MaxPageSize)
	}
	h := &Handler{
		cfg: cfg, props: properties(cfg.SourceURLTemplate != ""),
		cache: newDocCache(cfg.CacheBytes),
		slots: slots.New(slots.Config{
			Kind: "graphql", What: "GraphQL queries", Flag: "--max-concurrent-graphql", Limit: cfg.MaxConcurrent,
			RetryAfter: retryAfterSeconds,
		}, cfg.Admission),
	}
	h.resolver = &resolver{h: h, store: r}
	h.schema = gql.NewExecutableSchema(gql.Config{Resolvers: h.resolver})
	h.exec = executor.New(h.schema)
	if !cfg.DisableIntrospection {
		h.exec.Use(extension.Introspection{})
	}
	h.exec.Use(width{max: cfg.MaxWidth, maxTokens: cfg.MaxTokens, cache: h.cache})
	// bounds first: gqlgen's complexity walk expands every fragment spread anew.
	h.exec.Use(bounds{maxDepth: cfg.MaxDepth, maxFields: cfg.MaxComplexity, maxRoots: cfg.MaxRootFields})
	h.exec.Use(extension.FixedComplexityLimit(cfg.MaxComplexity))
	// Parsed and validated documents are kept: clients send the same few queries.
	h.exec.SetQueryCache(h.cache)
	h.exec.SetParserTokenLimit(cfg.MaxTokens)
	h.exec.SetErrorPresenter(presentError)
	h.exec.SetRecoverFunc(func(ctx context.Context, v any) error {
		cfg.Logger.ErrorContext(ctx, "graphql_resolver_panic", "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		return fmt.Errorf("%w: %v", errPanic, v)
	})
	return h, nil
}

// request is one GraphQL request as a client sends it.
type request struct {
	Query         string
	OperationName string
	Variables     map[string]any
}

// null is the data of an answer with errors.
var null = []byte("null")

// queryError is a GraphQL error as the client sees it.
type queryError struct {
	Message   string              `json:"message"`
	Locations []gqlerror.Location `json:"locations,omitempty"`
	Path      ast.Path            `json:"path,omitempty"`
}

// ServeHTTP runs one query and answers VDK's envelope {"data": ..., "errors": [...]}: the
// value of the one root field (data.jobs becomes data) and no errors. Any error answers
// with no data and the errors:
// 400 for the client's, 503 when the database is unavailable, 500 otherwise.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, err := h.decode(w, r)
	if err != nil {
		status := http.StatusBadRequest
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			status = http.StatusRequestEntityTooLarge
		}
		writeEnvelope(w, status, null, []queryError{{Message: err.Error()}})
		return
	}
	if req.Query == "" {
		req.Query = defaultQuery
	}
	if len(req.Query) > h.cfg.MaxQueryBytes {
		writeEnvelope(w, http.StatusBadRequest, null, []queryError{{Message: fmt.Sprintf(
			"the query is %d bytes long, more than the maximum of %d (--graphql-max-query-bytes); it was not parsed",
			len(req.Query), h.cfg.MaxQueryBytes)}})
		return
	}
	// GraphQL has no per-caller share: every query is the one caller "".
	release, err := h.slots.Acquire(r.Context(), "")
	if err != nil {
		w.Header().Set("Retry-After", strconv.Itoa(h.slots.RetryAfter()))
		writeEnvelope(w, http.StatusTooManyRequests, null, []queryError{{Message: busyMessage(err)}})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	resp := h.run(ctx, req, release)
	if len(resp.Errors) > 0 {
		status, errs := h.answerErrors(w, r, resp.Errors)
		writeEnvelope(w, status, null, errs)
		return
	}
	writeEnvelope(w, http.StatusOK, resp.Data, nil)
}

// exec1 runs one operation and returns its one response.
func (h *Handler) exec1(ctx context.Context, req request) *graphql.Response {
	start := graphql.Now()
	ctx = graphql.StartOperationTrace(ctx)
	params := &graphql.RawParams{
		Query: req.Query, OperationName: req.OperationName, Variables: req.Variables,
		ReadTime: graphql.TraceTiming{Start: start, End: start},
	}
	sctx, doc := stage(ctx)
	op, errs := h.exec.CreateOperationContext(sctx, params)
	if errs != nil {
		return &graphql.Response{Errors: errs}
	}
	h.cache.commit(doc) // parsed, validated and within every bound
	responses, ctx := h.exec.DispatchOperation(withRowBudget(ctx, h.cfg.MaxRows), op)
	resp := responses(ctx)
	// VDK's REST wrapper answers the value of the only root field (data.jobs becomes
	// data). A document with several root fields, or an introspection query, keeps its
	// shape. gqlgen writes compact JSON with the alias as the key.
	if roots := graphql.CollectFields(op, op.Operation.SelectionSet, []string{"Query"}); len(roots) == 1 && !strings.HasPrefix(roots[0].Name, "__") {
		prefix := `{"` + roots[0].Alias + `":`
		if d := resp.Data; bytes.HasPrefix(d, []byte(prefix)) && bytes.HasSuffix(d, []byte("}")) {
			resp.Data = d[len(prefix) : len(d)-1]
		}
	}
	return resp
}

// decode reads the request from the URL parameters (GET) or the JSON body (POST).
func (h *Handler) decode(w http.ResponseWriter, r *http.Request) (request, error) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		p := queryParams(r.URL.RawQuery)
		req := request{Query: p.Get("query"), OperationName: cmp.Or(p.Get("operation_name"), p.Get("operationName"))}
		vars, err := decodeVariables([]byte(p.Get("variables")))
		req.Variables = vars
		return req, err
	case http.MethodPost:
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBodyBytes))
		if err != nil {
			return request{}, fmt.Errorf("the request body could not be read: %w", err)
		}
		var b struct {
			Query          string          `json:"query"`
			OperationName  string          `json:"operationName"`
			OperationName2 string          `json:"operation_name"`
			Variables      json.RawMessage `json:"variables"`
		}
		if err := json.Unmarshal(body, &b); err != nil {
			return request{}, fmt.Errorf("the body must be a JSON object {query, variables, operationName}: %w", err)
		}
		vars := []byte(b.Variables)
		var s string
		if json.Unmarshal(vars, &s) == nil { // variables sent as a JSON string, as in the GET form
			vars = []byte(s)
		}
		req := request{Query: b.Query, OperationName: cmp.Or(b.OperationName, b.OperationName2)}
		req.Variables, err = decodeVariables(vars)
		return req, err
	default:
		return request{}, fmt.Errorf("method %s is not supported: use GET or POST", r.Method)
	}
}

// queryParams parses a GET query string as VDK's server does: the pairs are split on '&'
// only. Go's url.ParseQuery drops every pair that holds a ';' (golang.org/issue/25192),
// and Angular's HttpParams, which VDK's Operations UI sends its queries with, leaves ';'
// unescaped: a search text "a;b" would lose the whole variables parameter. Otherwise it
// is url.ParseQuery: the first '=' splits key and value, both query-unescaped ('+' is a
// space), and a pair that does not unescape is dropped.
func queryParams(raw string) url.Values {
	out := url.Values{}
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		k, v, _ := strings.Cut(pair, "=")
		k, errK := url.QueryUnescape(k)
		v, errV := url.QueryUnescape(v)
		if pair == "" || errK != nil || errV != nil {
			continue
		}
		out[k] = append(out[k], v)
	}
	return out
}

func decodeVariables(b []byte) (map[string]any, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || string(b) == "null" {
		return nil, nil
	}
	var vars map[string]any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber() // numbers as the client wrote them, for the executor to read as Int or Float
	if err := d.Decode(&vars); err != nil {
		return nil, fmt.Errorf("variables must be a JSON object: %w", err)
	}
	if d.More() {
		return nil, errors.New("variables must be a JSON object, with nothing after it")
	}
	return vars, nil
}

// answerErrors maps GraphQL errors to the status of the answer and what the client sees. Only
// the client's own errors are shown as they are; the others are logged with the
// operation id and shown as a generic message.
func (h *Handler) answerErrors(w http.ResponseWriter, r *http.Request, errs gqlerror.List) (int, []queryError) {
	ctx := r.Context()
	status := http.StatusBadRequest
	out := make([]queryError, 0, len(errs))
	seen := map[string]bool{}
	for _, e := range errs {
		// The same error of a nested field on every job of a page is shown once.
		if seen[e.Message] {
			continue
		}
		seen[e.Message] = true
		qe := queryError{Message: e.Message, Locations: e.Locations, Path: e.Path}
		if cause := e.Unwrap(); cause != nil {
			s, msg := classify(cause, e.Message)
			if s >= 500 {
				logArgs := []any{"op_id", w.Header().Get("X-OPID"), "status", s, "error", cause}
				if s == http.StatusServiceUnavailable {
					h.cfg.Logger.WarnContext(ctx, "graphql_dependency_unavailable", logArgs...)
				} else {
					h.cfg.Logger.ErrorContext(ctx, "graphql_query_failed", logArgs...)
				}
			}
			status = max(status, s)
			qe.Message = msg
		}
		out = append(out, qe)
	}
	return status, out
}

// inputError is an error the executor found in the arguments the client sent, such as a
// value that is no Int: the client's (400).
type inputError struct{ err error }

func (e inputError) Error() string { return e.err.Error() }
func (e inputError) Unwrap() error { return e.err }

// presentError is the executor's error presenter. The executor makes the errors of the
// client's arguments into GraphQL errors itself; the resolvers' own errors are plain ones.
func presentError(ctx context.Context, err error) *gqlerror.Error {
	if e, ok := errors.AsType[*gqlerror.Error](err); ok {
		c := *e
		c.Err = inputError{err: cmp.Or(e.Err, error(e))}
		return &c
	}
	return gqlerror.WrapPath(graphql.GetPath(ctx), err)
}

// classify returns the status and message of a resolver's error; message is the one the
// executor wrote.
func classify(err error, message string) (int, string) {
	var de *job.Error
	var in inputError
	switch {
	case errors.Is(err, context.DeadlineExceeded): // the query's deadline, seen through the store
		return http.StatusServiceUnavailable, "The query did not complete in time."
	case errors.As(err, &de) && de.Kind == job.KindInvalid:
		return http.StatusBadRequest, de.What + " " + de.Why
	case errors.As(err, &de) && de.Kind == job.KindUnavailable:
		return http.StatusServiceUnavailable, de.What + " " + de.Why
	case errors.As(err, &in):
		return http.StatusBadRequest, message
	case errors.Is(err, context.Canceled):
		return http.StatusServiceUnavailable, "The query did not complete in time."
	default:
		return http.StatusInternalServerError, "The query could not be completed because of an internal error; report it with the X-OPID of the response."
	}
}

// writeEnvelope writes {"data": data, "errors": errs}; data is JSON the executor wrote,
// copied as it is.
func writeEnvelope(w http.ResponseWriter, status int, data []byte, errs []queryError) {
	if errs == nil {
		errs = []queryError{}
	}
	e, err := json.Marshal(errs)
	if err != nil { // plain structs and the executor's paths
		panic(fmt.Sprintf("encode graphql errors: %v", err))
	}
	const head, mid, tail = `{"data":`, `,"errors":`, "}\n"
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(head)+len(data)+len(mid)+len(e)+len(tail)))
	w.WriteHeader(status)
	for _, part := range [][]byte{[]byte(head), data, []byte(mid), e, []byte(tail)} {
		if _, err := w.Write(part); err != nil {
			return // the client went away
		}
	}
}

// errPanic marks the error of a resolver that panicked: a bug, 500.
var errPanic = errors.New("resolver panicked")
