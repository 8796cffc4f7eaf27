package auth

import (
	"context"

	"github.com/datajobs/datajobs/internal/job"
)

// Authorizer is the operator's authorization webhook (Webhook implements it).
type Authorizer interface {
	Authorize(ctx context.Context, req WebhookRequest) error
}

// VisibleTeams is the one rule of whose rows a caller id may see in an answer that holds
// several teams' (the GraphQL queries, the console's job list): its teams, every team for
// an admin; with a webhook, each of those teams is asked about as a read of GET
// /data-jobs/for-team/{team}/jobs (what the REST API asks for that team's list) and those
// it denies are left out. Without this a team the webhook denies would be read through
// another path than its own (issue 22 for GraphQL, issue 41 M2 for the console). An
// admin's candidate teams are allTeams' (those that own jobs). A webhook that cannot
// answer is the error (503): nothing is shown rather than too much.
func VisibleTeams(ctx context.Context, id Identity, webhook Authorizer, allTeams func(context.Context) ([]string, error)) (job.Visibility, error) {
	switch {
	case webhook == nil && id.Admin:
		return job.AllTeams, nil
	case webhook == nil:
		return job.Visibility{Teams: id.Teams}, nil
	}
	candidates := id.Teams
	if id.Admin {
		var err error
		if candidates, err = allTeams(ctx); err != nil {
			return job.Visibility{}, err
		}
	}
	allowed := make([]string, 0, len(candidates))
	for _, team := range candidates {
		err := webhook.Authorize(ctx, WebhookRequest{
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
