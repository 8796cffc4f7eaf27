package httpapi

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/trigger"
)

// Triggers (issue 42; docs/triggers.md), a datajobs extension: what starts a job or a
// pipeline when something happens.

// triggerRoutes adds the trigger routes under the team path team, and the invocation
// route, authenticated by its signature alone.
func (a *api) triggerRoutes(rt *router, team string) {
	const triggers = "/triggers"
	const one = triggers + "/{trigger}"
	rt.collection(team+triggers, team+one, memberOfTeam,
		collection{list: a.listTriggers, create: a.createTrigger, get: a.getTrigger, del: a.deleteTrigger})
	rt.handleFunc("GET "+team+one+"/events", memberOfTeam, a.listTriggerEvents)
	rt.handleFunc("POST /data-jobs/triggers/{trigger_id}/events", signedCall, a.invokeTrigger)
}

// triggerResponse is a trigger: its spec with the defaults applied, and what the service
// knows of it. The signing secret is there only in the create's answer.
type triggerResponse struct {
	ID            string          `json:"id"`
	Team          string          `json:"team"`
	trigger.Spec                  // the spec's fields at the top, as POSTed
	InvocationURL string          `json:"invocation_url,omitempty"`
	SigningSecret string          `json:"signing_secret,omitempty"`
	CreatedBy     string          `json:"created_by"`
	CreatedAt     time.Time       `json:"created_at"`
	LastEvents    []trigger.Event `json:"last_events"`
}

func toTriggerResponse(r *http.Request, t trigger.Trigger) triggerResponse {
	out := triggerResponse{
		ID: t.ID, Team: t.Team, Spec: t.Spec, SigningSecret: string(t.Secret),
		CreatedBy: t.CreatedBy, CreatedAt: t.CreatedAt, LastEvents: t.LastEvents,
	}
	if out.LastEvents == nil {
		out.LastEvents = []trigger.Event{}
	}
	if t.Spec.Signed() {
		out.InvocationURL = baseURL(r) + "/data-jobs/triggers/" + url.PathEscape(t.ID) + "/events"
	}
	return out
}

// baseURL is the scheme and host the request reached (a proxy's X-Forwarded-Proto says the
// scheme it was called with).
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https" {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// createTrigger is POST …/triggers: 201 with the trigger (and, for a webhook or object
// trigger, its invocation URL and signing secret, shown this once).
func (a *api) createTrigger(w http.ResponseWriter, r *http.Request) error {
	body, err := a.body(w, r)
	if err != nil {
		return err
	}
	team := r.PathValue("team")
	t, err := a.svc.CreateTrigger(r.Context(), team, body, a.user(r, ""))
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/data-jobs/for-team/"+url.PathEscape(team)+"/triggers/"+url.PathEscape(t.Spec.Name))
	writeJSON(w, http.StatusCreated, toTriggerResponse(r, t))
	return nil
}

// getTrigger is GET …/triggers/{trigger}.
func (a *api) getTrigger(w http.ResponseWriter, r *http.Request) error {
	t, err := a.svc.GetTrigger(r.Context(), r.PathValue("team"), r.PathValue("trigger"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toTriggerResponse(r, t))
	return nil
}

// listTriggers is GET …/triggers[?job_name=|?pipeline_name=]: the team's triggers by
// name (at most trigger.MaxPerTeam), those of one target when asked.
func (a *api) listTriggers(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	target, pipeline := q.Get("job_name"), false
	if p := q.Get("pipeline_name"); p != "" {
		target, pipeline = p, true
	}
	ts, err := a.svc.ListTriggers(r.Context(), r.PathValue("team"), target, pipeline)
	if err != nil {
		return err
	}
	items := make([]triggerResponse, 0, len(ts))
	for _, t := range ts {
		items = append(items, toTriggerResponse(r, t))
	}
	writeJSON(w, http.StatusOK, map[string]any{"content": items, "total_items": len(items)})
	return nil
}

// deleteTrigger is DELETE …/triggers/{trigger}: 204; the runs it started go on.
func (a *api) deleteTrigger(w http.ResponseWriter, r *http.Request) error {
	err := a.svc.DeleteTrigger(r.Context(), r.PathValue("team"), r.PathValue("trigger"))
	return replyStatus(w, http.StatusNoContent, err)
}

// listTriggerEvents is GET …/triggers/{trigger}/events?page_number=&page_size=: its
// events of the last 30 days, newest first.
func (a *api) listTriggerEvents(w http.ResponseWriter, r *http.Request) error {
	page, size, err := pageOf(r)
	if err != nil {
		return err
	}
	events, total, err := a.svc.ListTriggerEvents(r.Context(), r.PathValue("team"), r.PathValue("trigger"), page, size)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, newPage(events, page, size, total))
	return nil
}

// invocationBody is the answer of an invocation: its (first) event's result, and for an
// object trigger's notification of several objects every event's.
type invocationBody struct {
	EventID       *int64                `json:"event_id"`
	Run           *string               `json:"run"`
	CoalescedInto *int64                `json:"coalesced_into"`
	Events        []trigger.EventResult `json:"events"`
}

// invokeTrigger is POST /data-jobs/triggers/{trigger_id}/events, a signed call: 202 with
// its event; 401 for a bad signature, 413 over the body limit, 429 with Retry-After over
// the trigger's events per minute (nothing recorded by any of them).
func (a *api) invokeTrigger(w http.ResponseWriter, r *http.Request) error {
	res, err := a.svc.InvokeTrigger(r.Context(), service.Invocation{
		TriggerID: r.PathValue("trigger_id"), Timestamp: r.Header.Get(trigger.TimestampHeader),
		Signature: r.Header.Get(trigger.SignatureHeader), IdempotencyKey: r.Header.Get(trigger.IdempotencyHeader),
		Body: r.Body,
	})
	if rl := (*trigger.RateLimited)(nil); errors.As(err, &rl) {
		w.Header().Set("Retry-After", strconv.Itoa(int((rl.RetryAfter+time.Second-1)/time.Second)))
	}
	if err != nil {
		return err
	}
	out := invocationBody{Events: res}
	if len(res) > 0 {
		out.EventID, out.Run, out.CoalescedInto = &res[0].EventID, res[0].Run, res[0].CoalescedInto
	} else {
		out.Events = []trigger.EventResult{}
	}
	writeJSON(w, http.StatusAccepted, out)
	return nil
}
