package ui

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/service"
)

// Re-run and backfill in the console (issue 27): the job page's "Backfill…" form near its
// top, its backfill panel (the latest backfills with their progress and a cancel button)
// and the re-run button of a finished execution. Each action goes through the same service call as its REST twin.

// backfillsShown is how many backfills the job page lists.
const backfillsShown = 10

type backfillRow struct {
	ID                     int64
	From, To               string
	MaxParallel            int
	CreatedBy, Message     string
	At                     *when
	State                  string
	Progress               job.BackfillProgress
	CancelURL, CancelledBy string
}

type backfillsData struct {
	// Href is the form's action; Rows the latest backfills, newest first.
	Href string
	Rows []backfillRow
	Err  string
	CSRF string
	// PageHref is the job page, which the panel reloads itself from (after an action, and
	// while a backfill runs).
	PageHref string
	Running  bool
}

// backfills is the job page's backfill panel; a failed read is shown in it, not as the
// page's error.
func (c *Console) backfills(r *http.Request, s session, team, name string) backfillsData {
	d := backfillsData{Href: jobURL(team, name) + "/backfills", PageHref: jobURL(team, name), CSRF: s.CSRF}
	bs, err := c.svc.Backfills(r.Context(), team, name)
	if err != nil {
		d.Err = errorText(err)
		return d
	}
	for i, b := range bs {
		if i == backfillsShown {
			break
		}
		row := backfillRow{
			ID: b.ID, From: b.From.UTC().Format(time.RFC3339), To: b.To.UTC().Format(time.RFC3339), MaxParallel: b.MaxParallel,
			CreatedBy: b.CreatedBy, CancelledBy: b.CancelledBy, Message: b.Message, At: c.when(&b.CreatedAt), Progress: b.Progress,
		}
		switch {
		case b.FinishedAt != nil && b.CancelledAt != nil:
			row.State = "cancelled"
		case b.FinishedAt != nil:
			row.State = "finished"
		case b.CancelledAt != nil:
			row.State = "cancelling"
		default:
			row.State = "running"
			d.Running = true
			row.CancelURL = d.Href + "/" + strconv.FormatInt(b.ID, 10) + "/cancel"
		}
		d.Rows = append(d.Rows, row)
	}
	return d
}

// createBackfill is the backfill form: from, to (RFC 3339, or a date and time without a
// zone, read as UTC) and max_parallel, as POST …/backfills takes them.
func (c *Console) createBackfill(w http.ResponseWriter, r *http.Request, s session) error {
	team, name := r.PathValue("team"), r.PathValue("job")
	req := service.BackfillRequest{From: formTime(r.PostFormValue("from")), To: formTime(r.PostFormValue("to"))}
	if v := strings.TrimSpace(r.PostFormValue("max_parallel")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return job.Invalid("max_parallel", fmt.Sprintf("a whole number from 1 to %d", job.MaxBackfillParallel), strconv.Quote(v))
		}
		req.MaxParallel = n
	}
	b, err := c.svc.CreateBackfill(r.Context(), team, name, req, s.User)
	if err != nil {
		return err
	}
	return c.done(w, r, fmt.Sprintf("Started backfill %d: %d runs, at most %d at once.", b.ID, b.Progress.Total, b.MaxParallel))
}

// formTime is a form's time as RFC 3339: a browser's datetime-local value (no seconds,
// no zone) is read as UTC, which the form says.
func formTime(v string) string {
	v = strings.TrimSpace(v)
	if _, err := time.Parse("2006-01-02T15:04", v); err == nil {
		return v + ":00Z"
	}
	if _, err := time.Parse("2006-01-02T15:04:05", v); err == nil {
		return v + "Z"
	}
	return v
}

// cancelBackfill cancels backfill {id}, as DELETE …/backfills/{id} does.
func (c *Console) cancelBackfill(w http.ResponseWriter, r *http.Request, s session) error {
	team, name := r.PathValue("team"), r.PathValue("job")
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		return job.BackfillNotFound(team, name, 0)
	}
	if _, err := c.svc.CancelBackfill(r.Context(), team, name, id, s.User); err != nil {
		return err
	}
	return c.done(w, r, fmt.Sprintf("Cancelled backfill %d: no more of its runs start, those under way are cancelled.", id))
}

// rerun starts execution {id} again with its arguments, as POST …/executions with
// rerun_of does.
func (c *Console) rerun(w http.ResponseWriter, r *http.Request, s session) error {
	team, name, id := r.PathValue("team"), r.PathValue("job"), r.PathValue("id")
	e, err := c.svc.StartExecution(r.Context(), team, name,
		service.ExecutionRequest{StartedBy: "manual/console/" + s.User, RerunOf: id}, s.User, rand.Text())
	if err != nil {
		return err
	}
	return c.done(w, r, "Started execution "+e.ID+", a re-run of "+id+".")
}

// rerunOf is the link to the execution a re-run repeats ("" for none).
func rerunOf(team, name, id string) string {
	if id == "" {
		return ""
	}
	return jobURL(team, name) + "/executions/" + url.PathEscape(id)
}
