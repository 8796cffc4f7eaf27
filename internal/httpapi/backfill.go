package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/service"
)

// Backfills (issue 27), a datajobs extension VDK clients do not know: one run per schedule
// time of the deployment in a range, started by the leader at most max_parallel at once.

// backfillRoutes adds the backfill routes under the deployment path dep.
func (a *api) backfillRoutes(rt *router, dep string) {
	rt.collection(dep+"/backfills", dep+"/backfills/{backfill_id}", memberOfTeam,
		collection{list: a.listBackfills, create: a.createBackfill, get: a.getBackfill, del: a.cancelBackfill})
}

// backfillRequest is the body of POST …/backfills.
type backfillRequest struct {
	From        string          `json:"from"`
	To          string          `json:"to"`
	MaxParallel int             `json:"max_parallel"`
	Args        json.RawMessage `json:"args"`
}

// backfillResponse is a backfill with its progress.
type backfillResponse struct {
	ID          int64            `json:"id"`
	JobName     string           `json:"job_name"`
	From        time.Time        `json:"from"`
	To          time.Time        `json:"to"`
	MaxParallel int              `json:"max_parallel"`
	Args        json.RawMessage  `json:"args"`
	CreatedBy   string           `json:"created_by"`
	CreatedAt   time.Time        `json:"created_at"`
	CancelledBy string           `json:"cancelled_by,omitempty"`
	CancelledAt *time.Time       `json:"cancelled_at"`
	Message     string           `json:"message,omitempty"`
	FinishedAt  *time.Time       `json:"finished_at"`
	Progress    progressResponse `json:"progress"`
}

type progressResponse struct {
	Total     int `json:"total"`
	Pending   int `json:"pending"`
	Running   int `json:"running"`
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	Cancelled int `json:"cancelled"`
}

func toBackfillResponse(b job.Backfill) backfillResponse {
	p := b.Progress
	return backfillResponse{
		ID: b.ID, JobName: b.JobName, From: b.From, To: b.To, MaxParallel: b.MaxParallel, Args: argsJSON(b.Args),
		CreatedBy: b.CreatedBy, CreatedAt: b.CreatedAt, CancelledBy: b.CancelledBy, CancelledAt: b.CancelledAt,
		Message: b.Message, FinishedAt: b.FinishedAt,
		Progress: progressResponse{
			Total: p.Total, Pending: p.Pending, Running: p.Running,
			Succeeded: p.Succeeded, Failed: p.Failed, Cancelled: p.Cancelled,
		},
	}
}

func backfillLocation(team, name string, id int64) string {
	return jobLocation(team, name) + "/deployments/release/backfills/" + strconv.FormatInt(id, 10)
}

// backfillOf returns the backfill of the path; an id that is not a number is not found.
func backfillOf(r *http.Request) (team, name string, id int64, err error) {
	return itemOf(r, "job", "backfill_id", job.BackfillNotFound)
}

// createBackfill is POST …/deployments/{id}/backfills: 201 with the backfill and its
// Location. from and to are required.
func (a *api) createBackfill(w http.ResponseWriter, r *http.Request) error {
	team, name := jobOf(r)
	req, err := decodeBody[backfillRequest](a, w, r)
	if err != nil {
		return err
	}
	b, err := a.svc.CreateBackfill(r.Context(), team, name, service.BackfillRequest{
		From: req.From, To: req.To, MaxParallel: req.MaxParallel, Args: req.Args,
	}, a.user(r, ""))
	if err != nil {
		return err
	}
	w.Header().Set("Location", backfillLocation(team, name, b.ID))
	writeJSON(w, http.StatusCreated, toBackfillResponse(b))
	return nil
}

// listBackfills is GET …/deployments/{id}/backfills: the latest 100, newest first.
func (a *api) listBackfills(w http.ResponseWriter, r *http.Request) error {
	team, name := jobOf(r)
	bs, err := a.svc.Backfills(r.Context(), team, name)
	return replyList(w, http.StatusOK, bs, err, toBackfillResponse)
}

// getBackfill is GET …/backfills/{backfill_id}.
func (a *api) getBackfill(w http.ResponseWriter, r *http.Request) error {
	return replyItem(w, r, backfillOf, a.svc.Backfill, toBackfillResponse)
}

// cancelBackfill is DELETE …/backfills/{backfill_id}: 200 with the backfill once the
// cancel is recorded; its runs under way turn cancelled as the leader deletes their Jobs.
func (a *api) cancelBackfill(w http.ResponseWriter, r *http.Request) error {
	team, name, id, err := backfillOf(r)
	if err != nil {
		return err
	}
	b, err := a.svc.CancelBackfill(r.Context(), team, name, id, a.user(r, ""))
	return reply(w, http.StatusOK, b, err, toBackfillResponse)
}
