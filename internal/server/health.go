package server

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/maintenance"
	"github.com/datajobs/datajobs/internal/metric"
	"github.com/datajobs/datajobs/internal/notify"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/synchronizer"
)

// health answers the liveness and readiness probes. Readiness is what the API needs: the
// database, migrated. Kubernetes and the synchronizer are the leader's business: they show
// in the /healthz detail and in metrics, never in readiness, because taking every replica
// out of its Service while the apiserver is down would stop an API that never calls it.
type health struct {
	db       *store.Store
	migrated <-chan struct{}
	kube     *kubeProbe
	sync     func() syncState
	safety   syncSafety
	// notify is the notification dispatcher (nil when this process has none).
	notify *notify.Dispatcher
	// log receives the readiness checks' failures (nil: none are logged).
	log *slog.Logger

	mu        sync.Mutex
	lastCheck map[string]string // check → its last error text ("" when it passed)
}

// syncState is the synchronizer's part of the /healthz detail.
type syncState struct {
	// Mode is on, dry-run or off.
	Mode SyncMode `json:"mode"`
	// Leader says whether this replica holds the synchronizer's lease (mode on only).
	Leader bool `json:"leader"`
	// Refusals are the safety refusals of this replica's synchronizer (a mass prune held
	// back, a rendering configuration not accepted), when there are any.
	Refusals *synchronizer.Safety `json:"refusals,omitempty"`
	// Shards are the shards of the execution targets other than the default one, each
	// with whether this replica leads it and why it does not run (its cluster unreachable).
	Shards []shardState `json:"shards,omitempty"`
}

// The listeners' probes. The public ones say which dependency fails, never its error
// text: that names hosts, ports and users of the database and the apiserver, which is
// the admin listener's and the logs' business. The admin ones carry the text.
func (h *health) publicLive(w http.ResponseWriter, r *http.Request)  { h.live(w, r, false) }
func (h *health) adminLive(w http.ResponseWriter, r *http.Request)   { h.live(w, r, true) }
func (h *health) publicReady(w http.ResponseWriter, r *http.Request) { h.ready(w, r, false) }
func (h *health) adminReady(w http.ResponseWriter, r *http.Request)  { h.ready(w, r, true) }

// live says that the process serves HTTP, always with 200: restarting it would not fix a
// dependency. Its detail says what this replica knows of Kubernetes (from the background
// probe, so the answer is immediate) and of its synchronizer; withErrors, the error
// texts (the admin listener) or only "unavailable" (the public one).
func (h *health) live(w http.ResponseWriter, _ *http.Request, withErrors bool) {
	kube, checked := h.kube.status()
	if !withErrors && kube != "ok" && !checked.IsZero() {
		kube = unavailable
	}
	st := h.sync()
	st.Refusals = h.safety.detail()
	detail := map[string]any{"kubernetes": kube, "sync": st}
	if failing := notificationsState(h.notify, withErrors); len(failing) > 0 {
		// The channels whose last delivery failed (the leader's: only it delivers).
		detail["notifications_failing"] = failing
	}
	if !checked.IsZero() {
		detail["kubernetes_checked_at"] = checked.UTC().Format(time.RFC3339)
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "detail": detail})
}

// unavailable is what a public probe says of a failing dependency.
const unavailable = "unavailable"

// ready checks the database (on a connection of its own: see store.Store.Ping) and the
// migrations in parallel and names each failing one, so an operator reading a 503 knows
// where to look; withErrors it also says why (the admin listener). A failure is logged
// when a check's answer changes, not on every probe.
func (h *health) ready(w http.ResponseWriter, r *http.Request, withErrors bool) {
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	checks := map[string]func(context.Context) error{
		"database": h.db.Ping,
		"migrations": func(context.Context) error {
			select {
			case <-h.migrated:
				return nil
			default:
				return errMigrationsPending
			}
		},
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	results := map[string]string{}
	status := http.StatusOK
	for name, check := range checks {
		wg.Go(func() {
			err := check(ctx)
			res := "ok"
			switch {
			case err != nil && withErrors:
				res = err.Error()
			case err != nil:
				res = unavailable
			}
			h.logChange(ctx, name, err)
			mu.Lock()
			defer mu.Unlock()
			results[name] = res
			if err != nil {
				status = http.StatusServiceUnavailable
			}
		})
	}
	wg.Wait()
	body := map[string]any{"status": "ok", "checks": results}
	if d := h.safety.detail(); d != nil {
		body["sync"] = d
	}
	if status != http.StatusOK {
		body["status"] = unavailable
	}
	writeJSON(w, status, body)
}

// logChange logs a readiness check whose answer differs from its previous one: the error
// text of a failure goes to the logs, where the public probe does not show it.
func (h *health) logChange(ctx context.Context, check string, err error) {
	text := ""
	if err != nil {
		text = err.Error()
	}
	h.mu.Lock()
	if h.lastCheck == nil {
		h.lastCheck = map[string]string{}
	}
	prev, seen := h.lastCheck[check]
	h.lastCheck[check] = text
	h.mu.Unlock()
	switch {
	case check == "migrations": // pending at every start: not a failure to report
	case seen && prev == text:
	case err != nil && h.log != nil:
		h.log.WarnContext(ctx, "readiness_check_failed", "check", check, "error", err)
	case seen && h.log != nil:
		h.log.InfoContext(ctx, "readiness_check_recovered", "check", check)
	}
}

var errMigrationsPending = errors.New("database migrations have not been applied yet")

// kubeProbe asks the apiserver whether it is ready every interval, in the background, so
// that /healthz answers at once whatever the apiserver does, and exports the answer as
// datajobs_kubernetes_reachable.
type kubeProbe struct {
	ping     func(context.Context) error
	interval time.Duration
	up       prometheus.Gauge

	mu      sync.Mutex
	last    string
	checked time.Time
}

func newKubeProbe(ping func(context.Context) error, interval time.Duration, reg prometheus.Registerer) *kubeProbe {
	up := metric.On(reg).Gauge("datajobs_kubernetes_reachable", "1 when the last probe of the Kubernetes API server's /readyz succeeded, else 0.")
	return &kubeProbe{ping: ping, interval: interval, up: up, last: "not checked yet"}
}

// service is the probe as a maintenance service every replica runs, from its start.
func (p *kubeProbe) service() maintenance.Service {
	return maintenance.Service{Name: "kubernetes_probe", Period: p.interval, AtStart: true, RunOnce: p.probe}
}

// probe asks the apiserver once and keeps its answer; an unreachable apiserver is the
// answer, not a failure of the probe (readiness logs its changes).
func (p *kubeProbe) probe(ctx context.Context, _ job.Fence) (maintenance.Counts, error) {
	err := p.ping(ctx)
	if ctx.Err() != nil {
		return nil, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last, p.checked = "ok", time.Now()
	p.up.Set(1)
	if err != nil {
		p.last = err.Error()
		p.up.Set(0)
	}
	return nil, nil
}

// status is the last probe's answer ("ok" or the error) and when it was made.
func (p *kubeProbe) status() (string, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last, p.checked
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
