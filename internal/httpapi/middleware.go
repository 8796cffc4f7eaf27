package httpapi

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/datajobs/datajobs/internal/auth"
	"github.com/datajobs/datajobs/internal/job"
)

// opIDHeader carries the operation id of a request, as in VDK: echoed when the client
// sends one, generated otherwise, and present in every response and request log.
const opIDHeader = "X-OPID"

type opIDKey struct{}

// opID returns the operation id of the request ctx belongs to.
func opID(ctx context.Context) string {
	id, _ := ctx.Value(opIDKey{}).(string)
	return id
}

// middleware wraps the router: operation id, one log line per request, recovery from
// panics, and VDK error bodies for paths and methods the router does not serve.
//
// It authenticates the caller of every request (401 with WWW-Authenticate: Bearer) and
// puts it in the context; the route's guard (router.handle) then authorizes it.
func (a *api) middleware(rt *router) http.Handler {
	mux := rt.mux
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get(opIDHeader)
		if !validOpID(id) {
			id = a.cfg.NewOpID()
		}
		w.Header().Set(opIDHeader, id)
		r = r.WithContext(context.WithValue(r.Context(), opIDKey{}, id))
		rec := &recorder{ResponseWriter: w}
		a.cfg.Metrics.started()
		defer a.cfg.Metrics.finished()

		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler { //nolint:errorlint // a sentinel panic value, not a returned error
					panic(p)
				}
				a.logger.ErrorContext(r.Context(), "http_handler_panic", "op_id", id, "method", r.Method,
					"pattern", r.Pattern, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				if !rec.wrote {
					writeErrorBody(rec, http.StatusInternalServerError, internalError())
				}
				rec.status = http.StatusInternalServerError
			}
			level := slog.LevelInfo
			if rec.status >= 500 {
				level = slog.LevelError
			}
			a.cfg.Metrics.observe(r.Method, r.Pattern, cmp.Or(rec.status, http.StatusOK), time.Since(start))
			a.logger.LogAttrs(r.Context(), level, "http_request",
				slog.String("method", r.Method), slog.String("pattern", r.Pattern),
				slog.Int("status", cmp.Or(rec.status, http.StatusOK)), slog.Duration("duration", time.Since(start)),
				slog.String("op_id", id))
		}()

		deadlines(rec, a.cfg.RequestTimeout)         // sources transfers extend theirs
		if len(r.URL.EscapedPath()) > MaxPathBytes { // before routing: no handler, no audit row
			writeErrorBody(rec, http.StatusRequestURITooLong, pathTooLong(len(r.URL.EscapedPath())))
			return
		}
		caller, err := a.callerOf(r, rt)
		if err != nil {
			if job.KindOf(err) == job.KindUnauthenticated {
				rec.Header().Set("WWW-Authenticate", `Bearer realm="datajobs"`)
			}
			a.writeError(rec, r, err)
			return
		}
		r = r.WithContext(auth.NewContext(r.Context(), caller))
		// Who changes what: the revisions of the change name this caller and op id.
		r = r.WithContext(job.WithActor(r.Context(), job.Actor{User: a.user(r, ""), OpID: id}))
		_, pattern := mux.Handler(r)
		if pattern == "" {
			a.unrouted(rec, r, mux)
			return
		}
		if _, ok := rt.routes[pattern]; !ok { // registered on the mux without a rule: refuse rather than guess
			a.writeError(rec, r, fmt.Errorf("route %q has no authorization rule", pattern))
			return
		}
		var out http.ResponseWriter = rec
		if a.cfg.ReplicaReads != nil {
			out, r = a.cfg.ReplicaReads.Prepare(rec, r, a.user(r, ""))
		}
		mux.ServeHTTP(out, r)
	})
}

// MaxPathBytes is the longest request path (escaped) the API routes; a longer one is
// refused with 414 before authentication and routing (issue 41, M1: a 64 KiB path reached
// the audit log whole). The API's longest paths are under 300 bytes with VDK's name limits.
const MaxPathBytes = 2048

// pathTooLong is the body of the 414 of a path of n bytes.
func pathTooLong(n int) *job.Error {
	return &job.Error{
		What:            fmt.Sprintf("The request's path is %d bytes long.", n),
		Why:             fmt.Sprintf("The API serves no path longer than %d bytes.", MaxPathBytes),
		Consequences:    "The request was not processed.",
		Countermeasures: "Check the team, job and deployment names in the path.",
	}
}

// unrouted answers a request no route matches with the router's status (404, or 405 with
// its Allow header) and a VDK error body instead of the router's plain text.
func (a *api) unrouted(w *recorder, r *http.Request, mux *http.ServeMux) {
	probe := &headerProbe{header: http.Header{}}
	h, _ := mux.Handler(r)
	h.ServeHTTP(probe, r)
	if allow := probe.header.Get("Allow"); allow != "" {
		w.Header().Set("Allow", allow)
	}
	if loc := probe.header.Get("Location"); loc != "" { // a redirect to the clean path
		w.Header().Set("Location", loc)
		w.WriteHeader(probe.status)
		return
	}
	status := cmp.Or(probe.status, http.StatusNotFound)
	e := &job.Error{
		What:            fmt.Sprintf("%s %s is not an endpoint of this API.", r.Method, r.URL.Path),
		Why:             http.StatusText(status) + ".",
		Consequences:    "The request was not processed.",
		Countermeasures: "Check the method and the path against the VDK Control Service API.",
	}
	writeErrorBody(w, status, e)
}

// validOpID accepts a client's operation id when it is short printable ASCII, so that it
// can go into logs and headers as it is.
func validOpID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// recorder remembers the status a handler wrote, for the request log.
type recorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if !r.wrote {
		r.status, r.wrote = http.StatusOK, true
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// headerProbe catches what the router would answer to an unrouted request.
type headerProbe struct {
	header http.Header
	status int
}

func (p *headerProbe) Header() http.Header { return p.header }
func (p *headerProbe) Write(b []byte) (int, error) {
	if p.status == 0 {
		p.status = http.StatusOK
	}
	return len(b), nil
}

func (p *headerProbe) WriteHeader(code int) {
	if p.status == 0 {
		p.status = code
	}
}
