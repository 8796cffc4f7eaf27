package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/secrets"
)

// TeamOAuthNotFound reports a team without OAuth credentials.
func TeamOAuthNotFound(team string) *job.Error {
	return job.NewError(job.KindNotFound,
		fmt.Sprintf("Team %q has no OAuth credentials.", team),
		"None were ever set for it.",
		"The request was not processed.",
		"Set them first (PUT /data-jobs/teams/{team}/oauth-credentials).",
	)
}

// GetTeamOAuth returns the OAuth credentials of team.
func (s *Store) GetTeamOAuth(ctx context.Context, team string) (secrets.TeamOAuth, error) {
	o := secrets.TeamOAuth{Team: team}
	err := s.pool.QueryRow(ctx, `SELECT client_id, key_id, data_key, client_secret FROM team_oauth_credentials WHERE team = $1`, team).
		Scan(&o.ClientID, &o.Secret.KeyID, &o.Secret.WrappedKey, &o.Secret.Sealed)
	return o, rowError(err, TeamOAuthNotFound(team), "get the oauth credentials of "+team)
}

// PutTeamOAuth replaces the OAuth credentials of team: seal gets the current envelope (nil
// when none) under the row's lock and returns the new one. The synchronizer is notified.
func (s *Store) PutTeamOAuth(ctx context.Context, team, clientID, by string, seal func(cur *secrets.Envelope) (secrets.Envelope, error)) error {
	return s.InTx(ctx, func(tx Tx) error {
		cur, err := currentEnvelope(ctx, tx, `SELECT key_id, data_key, client_secret FROM team_oauth_credentials WHERE team = $1 FOR UPDATE`,
			team, "read the oauth credentials of "+team)
		if err != nil {
			return err
		}
		next, err := seal(cur)
		if err != nil {
			return err
		}
		const q = `
INSERT INTO team_oauth_credentials (team, client_id, key_id, data_key, client_secret, updated_by) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (team) DO UPDATE SET client_id = excluded.client_id, key_id = excluded.key_id, data_key = excluded.data_key,
	client_secret = excluded.client_secret, updated_by = excluded.updated_by, updated_at = now()`
		if _, err := tx.Exec(ctx, q, team, clientID, next.KeyID, next.WrappedKey, next.Sealed, by); err != nil {
			return writeError("set the oauth credentials of "+team, err)
		}
		return notify(ctx, tx, TeamOAuthChannel, team)
	})
}

// TeamsOfClientIDs returns the team and client id of every team whose client id is one of
// ids; unknown ids have no entry.
func (s *Store) TeamsOfClientIDs(ctx context.Context, ids []string) ([]secrets.TeamOAuth, error) {
	rows, err := s.pool.Query(ctx, `SELECT team, client_id FROM team_oauth_credentials WHERE client_id = ANY($1) ORDER BY team`, ids)
	if err != nil {
		return nil, fmt.Errorf("look up client ids: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (secrets.TeamOAuth, error) {
		var o secrets.TeamOAuth
		return o, r.Scan(&o.Team, &o.ClientID)
	})
}

// DeliveredTeamOAuth returns the OAuth credentials of every team that has them and at
// least one job with a deployment: the teams whose pods the synchronizer gives them (a
// Secret for a team without deployed jobs would be read by no pod).
func (s *Store) DeliveredTeamOAuth(ctx context.Context) ([]secrets.TeamOAuth, error) {
	return s.deliveredTeamOAuth(ctx, DefaultTarget)
}

// deliveredTeamOAuth is DeliveredTeamOAuth of the teams that run in target.
func (s *Store) deliveredTeamOAuth(ctx context.Context, target string) ([]secrets.TeamOAuth, error) {
	const q = `
SELECT o.team, o.client_id, o.key_id, o.data_key, o.client_secret FROM team_oauth_credentials o
WHERE EXISTS (SELECT 1 FROM data_job j JOIN desired_data_job_deployment d ON d.data_job_name = j.name
	WHERE j.team = o.team AND coalesce(d.execution_target, datajobs_target_of(o.team)) = $1)
ORDER BY o.team`
	rows, err := s.pool.Query(ctx, q, target)
	if err != nil {
		return nil, fmt.Errorf("list the delivered oauth credentials: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (secrets.TeamOAuth, error) {
		var o secrets.TeamOAuth
		return o, r.Scan(&o.Team, &o.ClientID, &o.Secret.KeyID, &o.Secret.WrappedKey, &o.Secret.Sealed)
	})
}
