package graphapi

import (
	"context"

	"github.com/datajobs/datajobs/internal/auth"
	"github.com/datajobs/datajobs/internal/job"
)

// Authorizer is the operator's authorization webhook (auth.Webhook implements it).
type Authorizer = auth.Authorizer

// visibleTo is what the caller of ctx may see (auth.VisibleTeams, the rule the console's
// list follows too), and nothing when the request carries no caller.
func (h *Handler) visibleTo(ctx context.Context) (job.Visibility, error) {
	id, ok := auth.FromContext(ctx)
	if !ok {
		return job.Visibility{}, nil
	}
	return auth.VisibleTeams(ctx, id, h.cfg.Webhook, func(ctx context.Context) ([]string, error) { return h.resolver.store.Teams(ctx) })
}
