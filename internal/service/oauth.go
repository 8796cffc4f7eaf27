package service

import (
	"context"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/secrets"
)

// TeamOAuthStore is what the team OAuth use cases read and write.
type TeamOAuthStore interface {
	GetTeamOAuth(ctx context.Context, team string) (secrets.TeamOAuth, error)
	PutTeamOAuth(ctx context.Context, team, clientID, by string, seal func(cur *secrets.Envelope) (secrets.Envelope, error)) error
	TeamsOfClientIDs(ctx context.Context, ids []string) ([]secrets.TeamOAuth, error)
}

// TeamCredentials are a team's OAuth credentials in the clear.
type TeamCredentials struct {
	Team, ClientID, ClientSecret string
}

// TeamOAuth returns the credentials of team with the client secret opened; the caller is
// a member of team (VDK answers the secret to members only).
func (s *Secrets) TeamOAuth(ctx context.Context, team string) (TeamCredentials, error) {
	if err := s.configured(); err != nil {
		return TeamCredentials{}, err
	}
	o, err := s.store.GetTeamOAuth(ctx, team)
	if err != nil {
		return TeamCredentials{}, err
	}
	secret, err := s.keys.Open(secrets.TeamOwner(team), o.Secret)
	if err != nil {
		return TeamCredentials{}, unopened("the OAuth client secret of team "+team, err)
	}
	return TeamCredentials{Team: team, ClientID: o.ClientID, ClientSecret: string(secret)}, nil
}

// TeamClientID returns the client id of team, without opening the secret.
func (s *Secrets) TeamClientID(ctx context.Context, team string) (string, error) {
	if err := s.configured(); err != nil {
		return "", err
	}
	o, err := s.store.GetTeamOAuth(ctx, team)
	return o.ClientID, err
}

// SetTeamOAuth replaces the credentials of team, the client secret sealed, as by. Both
// must be non-empty strings of at most 4 KiB.
func (s *Secrets) SetTeamOAuth(ctx context.Context, team, clientID, clientSecret, by string) error {
	if err := s.configured(); err != nil {
		return err
	}
	if clientID == "" {
		return job.Invalid("clientId", "a non-empty string", `""`)
	}
	if err := job.ValidateText("clientId", clientID, 4096); err != nil {
		return err
	}
	if clientSecret == "" || len(clientSecret) > 4096 {
		return job.Invalid("clientSecret", "a non-empty string of at most 4096 bytes", "not one (its content is not shown)")
	}
	owner := secrets.TeamOwner(team)
	return s.store.PutTeamOAuth(ctx, team, clientID, by, func(cur *secrets.Envelope) (secrets.Envelope, error) {
		if cur == nil {
			return s.keys.Seal(owner, []byte(clientSecret))
		}
		env, err := s.keys.Reseal(owner, *cur, []byte(clientSecret))
		if err != nil {
			return env, unopened("the OAuth client secret of team "+team, err)
		}
		return env, nil
	})
}

// TeamsOfClientIDs maps client ids to their teams, as VDK's POST
// /data-jobs/oauth-credentials/client-ids does: unknown ids are left out.
func (s *Secrets) TeamsOfClientIDs(ctx context.Context, ids []string) ([]TeamCredentials, error) {
	if err := s.configured(); err != nil {
		return nil, err
	}
	if len(ids) > 1000 {
		return nil, job.Invalid("client ids", "an array of at most 1000 client ids", len(ids))
	}
	rows, err := s.store.TeamsOfClientIDs(ctx, ids)
	out := make([]TeamCredentials, 0, len(rows))
	for _, r := range rows {
		out = append(out, TeamCredentials{Team: r.Team, ClientID: r.ClientID})
	}
	return out, err
}
