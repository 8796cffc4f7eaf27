package graphapi

import (
	"context"
	"fmt"
	"sync"

	"github.com/datajobs/datajobs/internal/job"
)

// rowBudget bounds the rows one request may answer, whatever its page sizes: pages of
// up to MaxPageSize rows, several root fields, and a deployment's executions once per
// job of a page and per distinct set of arguments would otherwise multiply into millions
// of rows held in memory. Each read takes what it may return (a page its pageSize, the
// executions of a jobs page the jobs times their pageSize) before it is sent, so a
// request over the budget is refused before it reads anything more, and the same request
// on the same rows always gets the same answer.
type rowBudget struct {
	mu           sync.Mutex
	limit, taken int
}

type rowBudgetKey struct{}

// withRowBudget is ctx with a budget of limit rows for the operation run under it.
func withRowBudget(ctx context.Context, limit int) context.Context {
	return context.WithValue(ctx, rowBudgetKey{}, &rowBudget{limit: limit})
}

// takeRows takes n rows of ctx's budget for what, or refuses with a 400 naming the limit.
// A context without a budget (a resolver called outside exec1) takes nothing.
func takeRows(ctx context.Context, n int, what string) error {
	b, ok := ctx.Value(rowBudgetKey{}).(*rowBudget)
	if !ok {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.taken+n > b.limit {
		return job.NewError(job.KindInvalid,
			fmt.Sprintf("The query could answer up to %d rows, more than the maximum of %d.", b.taken+n, b.limit),
			fmt.Sprintf("Its pages of jobs and executions add up to that (%s: %d); a request answers at most %d rows in all, whatever its page sizes.",
				what, n, b.limit),
			"The query was not run.",
			"Ask for smaller pages, or fewer executions per job, and page through the rest.",
		)
	}
	b.taken += n
	return nil
}
