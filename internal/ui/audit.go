package ui

import (
	"context"
	"crypto/rand"
	"net/http"
	"time"

	"github.com/datajobs/datajobs/internal/job"
)

// audited runs an action of s, its revisions made by s.User under a new op id, and
// appends it to the team's audit log as the REST API does with its writes (route: the
// console's pattern), never with the form's values.
func (c *Console) audited(w http.ResponseWriter, r *http.Request, s session, h handlerFunc) error {
	op := rand.Text()
	r = r.WithContext(job.WithActor(r.Context(), job.Actor{User: s.User, OpID: op}))
	if r.Method != http.MethodPost || r.PathValue("team") == "" {
		return h(w, r, s)
	}
	rec := &statusRecorder{ResponseWriter: w}
	err := h(rec, r, s)
	if err != nil {
		c.fail(rec, r, err)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
	defer cancel()
	e := job.AuditEntry{
		Team: r.PathValue("team"), Actor: s.User, OpID: op, Method: r.Method, Route: r.Pattern,
		Path: r.URL.Path, JobName: r.PathValue("job"), Status: rec.statusOr(http.StatusOK),
	}
	if aerr := c.svc.RecordAudit(ctx, e); aerr != nil {
		c.cfg.Logger.ErrorContext(ctx, "audit_write_failed", "op_id", op, "team", e.Team, "route", e.Route, "err", aerr)
	}
	return nil
}

// statusRecorder remembers the status an action answered.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusRecorder) statusOr(def int) int {
	if s.status == 0 {
		return def
	}
	return s.status
}
