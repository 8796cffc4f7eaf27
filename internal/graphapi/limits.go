package graphapi

import (
	"context"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// retryAfterSeconds is what a client refused for lack of a slot is told to wait.
const retryAfterSeconds = 2

// acquire takes a slot of MaxConcurrent, or reports that none is free; release gives it
// back.
func (h *Handler) acquire() (release func(), ok bool) {
	select {
	case h.slots <- struct{}{}:
		return func() { <-h.slots }, true
	default:
		return nil, false
	}
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
