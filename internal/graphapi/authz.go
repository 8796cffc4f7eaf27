package graphapi

import (
	"context"

	"github.com/datajobs/datajobs/internal/auth"
	"github.com/datajobs/datajobs/internal/job"
)

// Authorizer is the operator's authorization webhook (auth.Webhook implements it).
type Authorizer interface {
	Authorize(ctx context.Context, req auth.WebhookRequest) error
}

// visibleTo is what the caller of ctx may see: its teams, every team for an admin, and
// nothing when the request carries no caller. With a webhook, each of those teams is
// asked about (as a read of GET /data-jobs/for-team/{team}/jobs) and those it denies are
// left out: the REST route asks the webhook only about the path's team, and the query
// answers rows of every team the caller may see, so without this a team the webhook
// denies would be read through another team's path (issue 22). An admin's candidate
// teams are those that own jobs. A webhook that cannot answer fails the query (503).
func (h *Handler) visibleTo(ctx context.Context) (job.Visibility, error) {
	id, ok := auth.FromContext(ctx)
	switch {
	case !ok:
		return job.Visibility{}, nil
	case h.cfg.Webhook == nil && id.Admin:
		return job.AllTeams, nil
	case h.cfg.Webhook == nil:
		return job.Visibility{Teams: id.Teams}, nil
	}
	candidates := id.Teams
	if id.Admin {
		var err error
		if candidates, err = h.resolver.store.Teams(ctx); err != nil {
			return job.Visibility{}, err
		}
	}
	allowed := make([]string, 0, len(candidates))
	for _, team := range candidates {
		err := h.cfg.Webhook.Authorize(ctx, auth.WebhookRequest{
			RequesterUserID:       id.Username,
			RequestedResourceTeam: team,
			RequestedHTTPPath:     "/data-jobs/for-team/" + team + "/jobs",
			RequestedHTTPVerb:     "GET",
			RequestedPermission:   "read",
		})
		switch job.KindOf(err) {
		case 0:
			allowed = append(allowed, team)
		case job.KindForbidden, job.KindUnauthenticated:
			// denied: the team's rows are not in the answer
		default:
			return job.Visibility{}, err
		}
	}
	return job.Visibility{Teams: allowed}, nil
}
