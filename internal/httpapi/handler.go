package httpapi

import (
	"net/http"
	"net/url"
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

// queryInt reads the query parameter name of q into v when it is given: anything but an
// integer is a 400 that shows it as sent.
func queryInt[T int | int64](q url.Values, name string, v *T) error {
	s := q.Get(name)
	if s == "" {
		return nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return job.Invalid(name, "an integer", s)
	}
	*v = T(n)
	return nil
}

// itemOf returns the team, the name under parent ("job" or "pipeline") and the id under
// key of the path of a numbered item (a backfill, a run): an id that is not a positive
// integer, which no row has, is notFound's, given the id as parsed for its message.
func itemOf(r *http.Request, parent, key string, notFound func(team, name string, id int64) *job.Error) (team, name string, id int64, err error) {
	team, name = r.PathValue("team"), r.PathValue(parent)
	id, perr := strconv.ParseInt(r.PathValue(key), 10, 64)
	if perr != nil || id <= 0 {
		return team, name, 0, notFound(team, name, id)
	}
	return team, name, id, nil
}
