package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/datajobs/datajobs/internal/job"
)

// errorBody is VDK's error body (BASE/exception/ErrorMessage), keys in VDK's order.
type errorBody struct {
	What            string `json:"what"`
	Why             string `json:"why"`
	Consequences    string `json:"consequences"`
	Countermeasures string `json:"countermeasures"`
}

// writeError answers err with its status and VDK body. Errors that are not the user's
// (500, 503) are logged here, once, with the operation id; their causes never reach the
// response.
func (a *api) writeError(w http.ResponseWriter, r *http.Request, err error) {
	ctx := r.Context()
	var de *job.Error
	switch {
	case errors.As(err, &de):
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		// The client went away; nobody reads this answer.
		de = job.Unavailable("request", err)
		de.Why = "The request was cancelled before it completed."
	case errors.Is(err, context.DeadlineExceeded):
		de = job.TooSlow("the request's deadline", err)
	default:
		de = internalError()
	}
	status := de.Kind.HTTPStatus()
	switch {
	case status == http.StatusInternalServerError:
		a.logger.ErrorContext(ctx, "http_request_failed", "op_id", opID(ctx), "method", r.Method, "pattern", r.Pattern, "error", err)
	case status == http.StatusServiceUnavailable && ctx.Err() == nil:
		a.logger.WarnContext(ctx, "http_dependency_unavailable", "op_id", opID(ctx), "method", r.Method, "pattern", r.Pattern, "error", err)
	}
	writeErrorBody(w, status, de)
}

func writeErrorBody(w http.ResponseWriter, status int, e *job.Error) {
	writeJSON(w, status, errorBody{What: e.What, Why: e.Why, Consequences: e.Consequences, Countermeasures: e.Countermeasures})
}

// internalError is the body of a bug: it says nothing about the cause, which is logged.
func internalError() *job.Error {
	return &job.Error{
		What:            "The request could not be processed because of an internal error.",
		Why:             "datajobs hit an unexpected condition.",
		Consequences:    "The request may not have been completed.",
		Countermeasures: "Retry; if it persists, report it to the operators with the X-OPID of the response.",
	}
}

// malformedBody reports a body that is not the JSON the endpoint takes.
func malformedBody(err error) *job.Error {
	return &job.Error{
		Kind:            job.KindInvalid,
		What:            "An issue with the JSON body of the request was found.",
		Why:             fmt.Sprintf("The body could not be read: %v.", err),
		Consequences:    "The request was not processed and nothing was changed.",
		Countermeasures: "Send a valid JSON object in the shape of the VDK Control Service API.",
		Err:             err,
	}
}

// bodyTooLarge reports a body over the configured limit.
func bodyTooLarge(limit int64) *job.Error {
	return job.NewError(job.KindTooLarge,
		"The request body is too large.",
		fmt.Sprintf("Bodies are limited to %d bytes.", limit),
		"The request was not processed and nothing was changed.",
		"Send a smaller body.",
	)
}

// reply answers body(v) with status, or returns err (for the error mapping) and answers
// nothing: the tail of a handler that read or wrote one thing through the service.
func reply[T, B any](w http.ResponseWriter, status int, v T, err error, body func(T) B) error {
	if err != nil {
		return err
	}
	writeJSON(w, status, body(v))
	return nil
}

// replyItem answers body of the numbered item the path names, as of reads the path (the
// team, the parent's name and the id, or the item's not-found) and read reads or changes
// the item, or returns the error as reply does: a handler of one backfill or run.
func replyItem[T, B any](w http.ResponseWriter, r *http.Request, of func(*http.Request) (string, string, int64, error),
	read func(ctx context.Context, team, name string, id int64) (T, error), body func(T) B,
) error {
	team, name, id, err := of(r)
	if err != nil {
		return err
	}
	v, err := read(r.Context(), team, name, id)
	return reply(w, http.StatusOK, v, err, body)
}

// replyList answers bodies(vs, body) with status, or returns err as reply does: the tail
// of a handler that read a list through the service.
func replyList[T, B any](w http.ResponseWriter, status int, vs []T, err error, body func(T) B) error {
	if err != nil {
		return err
	}
	writeJSON(w, status, bodies(vs, body))
	return nil
}

// replyStatus answers status with no body, or returns err as reply does: the tail of a
// handler that changed something and has nothing to show for it.
func replyStatus(w http.ResponseWriter, status int, err error) error {
	if err != nil {
		return err
	}
	w.WriteHeader(status)
	return nil
}

// bodies converts each of vs for an answer; an empty list is [], never null.
func bodies[T, B any](vs []T, body func(T) B) []B {
	out := make([]B, 0, len(vs))
	for _, v := range vs {
		out = append(out, body(v))
	}
	return out
}

// asIs is the body of a value that carries the API's names itself (a pipeline run).
func asIs[T any](v T) T { return v }

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil { // only plain structs are encoded here
		panic(fmt.Sprintf("encode response: %v", err))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
