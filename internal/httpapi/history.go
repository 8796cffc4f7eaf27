package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/datajobs/datajobs/internal/job"
)

// The history endpoints (issue 27): a job's revisions, the rollback to one, and the
// team's audit log of every write through the API.

// revisionResponse is one revision as the API shows it: the spec with the API's
// snake_case names.
type revisionResponse struct {
	Revision   int               `json:"revision"`
	JobName    string            `json:"job_name"`
	Kind       string            `json:"kind"`
	Actor      string            `json:"actor"`
	OpID       string            `json:"op_id"`
	CreatedAt  time.Time         `json:"created_at"`
	RollbackOf *int              `json:"rollback_of"`
	Diff       []job.FieldChange `json:"diff"`
	Spec       revisionSpecBody  `json:"spec"`
	// Source is the <repo>@<commit> of the file an apply made the change from ("": the API).
	Source string `json:"source"`
}

type revisionSpecBody struct {
	Job        json.RawMessage `json:"job"`
	Deployment json.RawMessage `json:"deployment"`
}

type revisionsResponse struct {
	Revisions []revisionResponse `json:"revisions"`
	// NextBefore is the before of the next page; null on the last page.
	NextBefore *int `json:"next_before"`
}

func toRevisionResponse(r job.Revision) revisionResponse {
	out := revisionResponse{
		Revision: r.Number, JobName: r.JobName, Kind: r.Kind, Actor: r.Actor, OpID: r.OpID,
		CreatedAt: r.CreatedAt, Diff: r.Diff, Source: r.Source,
		Spec: revisionSpecBody{Job: job.SnakeCaseJSON(r.Spec.Job), Deployment: json.RawMessage("null")},
	}
	if r.Spec.Deployment != nil {
		out.Spec.Deployment = job.SnakeCaseJSON(*r.Spec.Deployment)
	}
	if r.RollbackOf != 0 {
		out.RollbackOf = &r.RollbackOf
	}
	return out
}

// listRevisions is GET .../deployments/{deployment_id}/revisions?page_size=&before=:
// the job's revisions, newest first.
func (a *api) listRevisions(w http.ResponseWriter, r *http.Request) error {
	team, name := jobOf(r)
	before, limit, err := pageParams(r)
	if err != nil {
		return err
	}
	page, err := a.svc.Revisions(r.Context(), team, name, int(before), limit)
	if err != nil {
		return err
	}
	out := revisionsResponse{Revisions: make([]revisionResponse, 0, len(page.Revisions))}
	for _, rv := range page.Revisions {
		out.Revisions = append(out.Revisions, toRevisionResponse(rv))
	}
	if page.Next != 0 {
		out.NextBefore = &page.Next
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// rollback is POST .../deployments/{deployment_id}/revisions/{revision}/rollback: 202,
// the revision's deployment is the desired one again (applied asynchronously).
func (a *api) rollback(w http.ResponseWriter, r *http.Request) error {
	team, name := jobOf(r)
	n, err := strconv.Atoi(r.PathValue("revision"))
	if err != nil {
		return job.RevisionNotFound(name, 0)
	}
	_, err = a.svc.RollbackDeployment(r.Context(), team, name, n, a.user(r, ""))
	return replyStatus(w, http.StatusAccepted, err)
}

type auditEntryBody struct {
	ID        int64     `json:"id"`
	CreatedAt time.Time `json:"created_at"`
	Actor     string    `json:"actor"`
	OpID      string    `json:"op_id"`
	Method    string    `json:"method"`
	Route     string    `json:"route"`
	Path      string    `json:"path"`
	JobName   string    `json:"job_name"`
	Status    int       `json:"status"`
}

type auditResponse struct {
	Entries []auditEntryBody `json:"entries"`
	// NextBefore is the before of the next page; null on the last page.
	NextBefore *int64 `json:"next_before"`
}

// audit is GET /data-jobs/for-team/{team}/audit?page_size=&before=: the team's writes,
// newest first, keyset-paged by entry id.
func (a *api) audit(w http.ResponseWriter, r *http.Request) error {
	before, limit, err := pageParams(r)
	if err != nil {
		return err
	}
	page, err := a.svc.Audit(r.Context(), r.PathValue("team"), before, limit)
	if err != nil {
		return err
	}
	out := auditResponse{Entries: make([]auditEntryBody, 0, len(page.Entries))}
	for _, e := range page.Entries {
		out.Entries = append(out.Entries, auditEntryBody{
			ID: e.ID, CreatedAt: e.CreatedAt, Actor: e.Actor, OpID: e.OpID, Method: e.Method,
			Route: e.Route, Path: e.Path, JobName: e.JobName, Status: e.Status,
		})
	}
	if page.Next != 0 {
		out.NextBefore = &page.Next
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// pageParams reads ?before= and ?page_size= (absent: 0, the service's defaults).
func pageParams(r *http.Request) (before int64, limit int, err error) {
	q := r.URL.Query()
	if err := queryInt(q, "before", &before); err != nil {
		return 0, 0, err
	}
	if err := queryInt(q, "page_size", &limit); err != nil {
		return 0, 0, err
	}
	return before, limit, nil
}

// auditNote is a request's mark that its POST was a read (the GraphQL jobs query), so it
// is no write for the audit log.
type auditNote struct{ read bool }

type auditNoteKey struct{}

// markRead marks the request of ctx as a read.
func markRead(ctx context.Context) {
	if n, ok := ctx.Value(auditNoteKey{}).(*auditNote); ok {
		n.read = true
	}
}

// audited runs h and appends every write (any method but GET and HEAD) that passed
// authorization to the audit log of each team the route names: who, when, the op id,
// the route, the path and the status, never the body (a secret's value, properties).
// The entry is written after the answer, on a context the client's leaving does not
// cancel; a failure to write it is logged.
func (a *api) audited(rt route, w http.ResponseWriter, r *http.Request, h http.Handler) {
	if r.Method == http.MethodGet || r.Method == http.MethodHead || len(rt.rule.teamParams) == 0 {
		h.ServeHTTP(w, r)
		return
	}
	note := &auditNote{}
	r = r.WithContext(context.WithValue(r.Context(), auditNoteKey{}, note))
	rec := &recorder{ResponseWriter: w}
	h.ServeHTTP(rec, r)
	if note.read {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
	defer cancel()
	for _, p := range rt.rule.teamParams {
		e := job.AuditEntry{
			Team: r.PathValue(p), Actor: a.user(r, ""), OpID: opID(r.Context()), Method: r.Method,
			Route: r.Pattern, Path: r.URL.Path, JobName: r.PathValue("job"), Status: statusOf(rec),
		}
		if err := a.svc.RecordAudit(ctx, e); err != nil {
			a.logger.ErrorContext(ctx, "audit_write_failed", "op_id", e.OpID, "team", e.Team, "route", e.Route, "err", err)
		}
	}
}

func statusOf(rec *recorder) int {
	if rec.status == 0 {
		return http.StatusOK
	}
	return rec.status
}
