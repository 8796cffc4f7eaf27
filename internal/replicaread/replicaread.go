// Package replicaread lets a request's list reads be served by the database's streaming
// replica (issue 44) without ever hiding a caller's own write from it: a write's answer
// carries the primary's WAL position (a header and a cookie, and it is remembered per
// caller for a minute), a later read sends it back, and the store serves that read from
// the primary while the replica has not replayed it. A read's answer says how stale it
// may be (X-Datajobs-Read-Lag-Ms).
package replicaread

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/datajobs/datajobs/internal/store"
)

// The headers and the cookie of the exchange.
const (
	// PositionHeader is on a write's answer: the primary's WAL position after it.
	PositionHeader = "X-Datajobs-LSN"
	// MinPositionHeader is sent back on a read: serve nothing older than this position.
	MinPositionHeader = "X-Datajobs-Min-LSN"
	// LagHeader is on a read's answer: how far behind the primary its data may be, in
	// milliseconds (0 when the primary served it).
	LagHeader = "X-Datajobs-Read-Lag-Ms"
	// positionCookie carries the position for browsers (the console).
	positionCookie = "datajobs_lsn"
	// remembered is how long a caller's last write is remembered by this process.
	remembered = time.Minute
	// maxCallers bounds the callers remembered; past it the oldest are forgotten first.
	maxCallers = 10000
)

// Positions is the store's side: whether a replica serves, and the primary's position.
type Positions interface {
	HasReplica() bool
	CurrentLSN(ctx context.Context) (string, error)
}

// Router prepares requests for replica reads. The zero value is not usable: New.
type Router struct {
	db     Positions
	logger *slog.Logger

	mu   sync.Mutex
	last map[string]written // by caller
}

// written is a caller's last write.
type written struct {
	lsn string
	at  time.Time
}

// New returns the router of db's requests; nil when db has no replica, so that callers
// skip it with one nil check.
func New(db Positions, logger *slog.Logger) *Router {
	if !db.HasReplica() {
		return nil
	}
	return &Router{db: db, logger: logger, last: map[string]written{}}
}

// Prepare readies r of caller (its identity, "" anonymous): a GET or HEAD may read from
// the replica past the caller's last write; any other method is a write whose answer
// carries the primary's position. The returned writer must serve the request.
func (rt *Router) Prepare(w http.ResponseWriter, r *http.Request, caller string) (http.ResponseWriter, *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return &answer{ResponseWriter: w, rt: rt, r: r, caller: caller}, r
	}
	ctx, st := store.WithReplicaReads(r.Context(), rt.minPosition(r, caller))
	return &answer{ResponseWriter: w, rt: rt, r: r, caller: caller, read: st}, r.WithContext(ctx)
}

// minPosition is the latest of the positions the request and this process know of the
// caller's writes. Positions are compared as PostgreSQL orders them (hi/lo hex pairs).
func (rt *Router) minPosition(r *http.Request, caller string) string {
	best := ""
	consider := func(lsn string) {
		if store.ValidLSN(lsn) && (best == "" || lsnAfter(lsn, best)) {
			best = lsn
		}
	}
	consider(r.Header.Get(MinPositionHeader))
	if c, err := r.Cookie(positionCookie); err == nil {
		consider(c.Value)
	}
	if caller != "" {
		rt.mu.Lock()
		if wr, ok := rt.last[caller]; ok && time.Since(wr.at) < remembered {
			consider(wr.lsn)
		}
		rt.mu.Unlock()
	}
	return best
}

// wrote remembers caller's write at lsn, forgetting expired callers when the map is full.
func (rt *Router) wrote(caller, lsn string) {
	if caller == "" {
		return
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if len(rt.last) >= maxCallers {
		for c, wr := range rt.last {
			if time.Since(wr.at) >= remembered || len(rt.last) >= maxCallers {
				delete(rt.last, c)
			}
		}
	}
	rt.last[caller] = written{lsn: lsn, at: time.Now()}
}

// lsnAfter reports whether position a is after b (both valid: "HI/LO" in hex).
func lsnAfter(a, b string) bool { return lsnValue(a) > lsnValue(b) }

func lsnValue(s string) uint64 {
	for i := range len(s) {
		if s[i] == '/' {
			hi, _ := strconv.ParseUint(s[:i], 16, 32)
			lo, _ := strconv.ParseUint(s[i+1:], 16, 32)
			return hi<<32 | lo
		}
	}
	return 0
}

// answer sets the exchange's headers when the answer's status is written.
type answer struct {
	http.ResponseWriter
	rt     *Router
	r      *http.Request
	caller string
	read   *store.ReadState // nil: a write
	done   bool
}

func (a *answer) WriteHeader(status int) {
	if !a.done {
		a.done = true
		a.headers(status)
	}
	a.ResponseWriter.WriteHeader(status)
}

func (a *answer) Write(p []byte) (int, error) {
	if !a.done {
		a.WriteHeader(http.StatusOK)
	}
	return a.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection (deadlines, flushes).
func (a *answer) Unwrap() http.ResponseWriter { return a.ResponseWriter }

func (a *answer) headers(status int) {
	if a.read != nil {
		_, lag := a.read.Served()
		a.Header().Set(LagHeader, strconv.FormatInt(lag.Milliseconds(), 10))
		return
	}
	if status >= http.StatusBadRequest {
		return
	}
	lsn, err := a.rt.db.CurrentLSN(a.r.Context())
	if err != nil { // the write stands; the caller's next read may then be stale
		a.rt.logger.WarnContext(a.r.Context(), "replica_read_position_unknown", "error", err)
		return
	}
	a.rt.wrote(a.caller, lsn)
	a.Header().Set(PositionHeader, lsn)
	http.SetCookie(a, &http.Cookie{
		Name: positionCookie, Value: lsn, Path: "/", MaxAge: int(remembered.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteLaxMode,
	})
}
