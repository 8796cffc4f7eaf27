package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/store"
)

// health answers the liveness and readiness probes.
type health struct {
	db       *store.Store
	cluster  *kube.Cluster
	migrated <-chan struct{}
	safety   syncSafety
}

// live says only that the process serves HTTP: restarting it would not fix a dependency.
func (h *health) live(w http.ResponseWriter, _ *http.Request) {
	body := map[string]any{"status": "ok"}
	if d := h.safety.detail(); d != nil {
		body["sync"] = d
	}
	writeJSON(w, http.StatusOK, body)
}

// ready checks every dependency in parallel and names each failing one, so an operator
// reading a 503 knows where to look.
func (h *health) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	checks := map[string]func(context.Context) error{
		"database":   h.db.Ping,
		"kubernetes": h.cluster.Ping,
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

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
