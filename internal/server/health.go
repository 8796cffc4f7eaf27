package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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
}

// live says that the process serves HTTP, always with 200: restarting it would not fix a
// dependency. Its detail says what this replica knows of Kubernetes (from the background
// probe, so the answer is immediate) and of its synchronizer.
func (h *health) live(w http.ResponseWriter, _ *http.Request) {
	kube, checked := h.kube.status()
	st := h.sync()
	st.Refusals = h.safety.detail()
	detail := map[string]any{"kubernetes": kube, "sync": st}
	if !checked.IsZero() {
		detail["kubernetes_checked_at"] = checked.UTC().Format(time.RFC3339)
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "detail": detail})
}

// ready checks the database and the migrations in parallel and names each failing one, so
// an operator reading a 503 knows where to look.
func (h *health) ready(w http.ResponseWriter, r *http.Request) {
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
			res := "ok"
			if err := check(ctx); err != nil {
				res = err.Error()
			}
			mu.Lock()
			defer mu.Unlock()
			results[name] = res
			if res != "ok" {
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
		body["status"] = "unavailable"
	}
	writeJSON(w, status, body)
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
	up := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "datajobs_kubernetes_reachable",
		Help: "1 when the last probe of the Kubernetes API server's /readyz succeeded, else 0.",
	})
	reg.MustRegister(up)
	return &kubeProbe{ping: ping, interval: interval, up: up, last: "not checked yet"}
}

// run probes until ctx ends.
func (p *kubeProbe) run(ctx context.Context) {
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		err := p.ping(ctx)
		if ctx.Err() != nil {
			return
		}
		p.mu.Lock()
		p.last, p.checked = "ok", time.Now()
		p.up.Set(1)
		if err != nil {
			p.last = err.Error()
			p.up.Set(0)
		}
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
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
