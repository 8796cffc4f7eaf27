package httpapi

import (
	"net/http"
	"strconv"

	"github.com/datajobs/datajobs/internal/job"
)

// handler is an endpoint: it returns its error instead of answering it, and serve answers
// every error the same way (writeError: the VDK error body and its status).
type handler func(w http.ResponseWriter, r *http.Request) error

// serve adapts h to net/http. Before h runs, a path naming a team, job or execution that
// no job can have is not found, without asking the database; so h reads the path's
// values with jobOf and executionOf, already checked.
func (a *api) serve(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		err := checkPath(r)
		if err == nil {
			err = h(w, r)
		}
		if err != nil {
			a.writeError(w, r, err)
		}
	}
}

// checkPath checks the {team}, {job} and {execution_id} of a path under a job.
func checkPath(r *http.Request) error {
	team, name, id := r.PathValue("team"), r.PathValue("job"), r.PathValue("execution_id")
	switch {
	case name == "": // not a path under a job
		return nil
	case job.ValidateTeam(team) != nil || job.ValidateName(name) != nil:
		return job.JobNotFound(team, name)
	case id != "" && job.ValidateText("execution_id", id, 253) != nil:
		return job.ExecutionNotFound(team, name, id)
	}
	return nil
}

// jobOf returns the team and job name of the path, checked by serve.
func jobOf(r *http.Request) (team, name string) {
	return r.PathValue("team"), r.PathValue("job")
}

// executionOf returns the team, job name and execution id of the path, checked by serve.
func executionOf(r *http.Request) (team, name, id string) {
	return r.PathValue("team"), r.PathValue("job"), r.PathValue("execution_id")
}

// body reads a JSON request body of at most Config.MaxBodyBytes.
func (a *api) body(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	return readBody(w, r, a.cfg.MaxBodyBytes)
}

// decodeBody reads a JSON request body (api.body) and decodes it into a T (decodeJSON):
// the head of a handler that takes a JSON body.
func decodeBody[T any](a *api, w http.ResponseWriter, r *http.Request) (T, error) {
	return decodeBodyWith[T](a, w, r, decodeJSON)
}

// decodeStrictBody is decodeBody for a datajobs body that names no unknown field
// (decodeStrictJSON).
func decodeStrictBody[T any](a *api, w http.ResponseWriter, r *http.Request) (T, error) {
	return decodeBodyWith[T](a, w, r, decodeStrictJSON)
}

func decodeBodyWith[T any](a *api, w http.ResponseWriter, r *http.Request, decode func([]byte, any) error) (T, error) {
	var v T
	body, err := a.body(w, r)
	if err == nil {
		err = decode(body, &v)
	}
	return v, err
}

// pathID reads the path's value key as the id of a row: false when it is not a positive
// integer, which no row has (the caller's not found). The id is returned as parsed, for
// that message.
func pathID(r *http.Request, key string) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue(key), 10, 64)
	return id, err == nil && id > 0
}
