package graphapi

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/datajobs/datajobs/internal/job"
)

// retryAfterSeconds is what a client refused for lack of a slot is told to wait.
const retryAfterSeconds = 2

// busyMessage is the refusal of err (slots' busy error) as one GraphQL error message:
// what, why and what to do, as the REST API's VDK body says them.
func busyMessage(err error) string {
	var de *job.Error
	if !errors.As(err, &de) {
		return err.Error()
	}
	return strings.Join([]string{de.What, de.Why, de.Countermeasures}, " ")
}

// run executes req under ctx's deadline, parsing and validation included: gqlparser does
// not look at a context, so the operation runs in a goroutine and the request answers 503
// at the deadline whatever stage it is in. The goroutine keeps the slot (release) until
// it ends, so abandoned work still counts against MaxConcurrent; the parser's token limit
// and MaxQueryBytes bound how long that is.
func (h *Handler) run(ctx context.Context, req request, release func()) *graphql.Response {
	out := make(chan *graphql.Response, 1)
	release = sync.OnceFunc(release)
	go func() {
		defer release() // should exec1 panic
		resp := h.exec1(ctx, req)
		release() // before the answer: a client's next query finds the slot free
		out <- resp
	}()
	select {
	case resp := <-out:
		if ctx.Err() == nil {
			return resp
		}
	case <-ctx.Done():
	}
	return &graphql.Response{Errors: gqlerror.List{{Message: "the query did not complete in time", Err: ctx.Err()}}}
}
