package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ConsoleSession is a signed-in browser of the web console (migration 0014). The browser
// holds a random id; the table holds its SHA-256 (IDHash), so a copy of the table signs
// nobody in.
type ConsoleSession struct {
	IDHash    []byte
	Username  string
	Teams     []string
	Admin     bool
	Verified  bool
	CSRF      string
	ExpiresAt time.Time
}

// CreateConsoleSession records a new session and writes its identity (teams, admin) to
// every other open session of the same user: what the identity provider asserts now holds
// for all of them at once, a team taken away included. Expired sessions are deleted on
// the way.
func (s *Store) CreateConsoleSession(ctx context.Context, cs ConsoleSession) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return translate(fmt.Errorf("create console session: %w", err))
	}
	defer func() { _ = tx.Rollback(ctx) }()
	teams := cs.Teams
	if teams == nil {
		teams = []string{}
	}
	if _, err := tx.Exec(ctx, `DELETE FROM console_session WHERE expires_at <= now()`); err != nil {
		return translate(fmt.Errorf("delete expired console sessions: %w", err))
	}
	if _, err := tx.Exec(ctx, `UPDATE console_session SET teams = $2, admin = $3, verified = $4 WHERE username = $1`,
		cs.Username, teams, cs.Admin, cs.Verified); err != nil {
		return translate(fmt.Errorf("update console sessions of %s: %w", cs.Username, err))
	}
	if _, err := tx.Exec(ctx, `INSERT INTO console_session (id_hash, username, teams, admin, verified, csrf, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		cs.IDHash, cs.Username, teams, cs.Admin, cs.Verified, cs.CSRF, cs.ExpiresAt); err != nil {
		return translate(fmt.Errorf("create console session: %w", err))
	}
	return translate(tx.Commit(ctx))
}

// ErrNoConsoleSession is returned for an id that is not (or no longer) a session.
var ErrNoConsoleSession = errors.New("no such console session")

// ConsoleSessionByID returns the unexpired session of that id hash, or ErrNoConsoleSession.
func (s *Store) ConsoleSessionByID(ctx context.Context, idHash []byte) (ConsoleSession, error) {
	cs := ConsoleSession{IDHash: idHash}
	err := s.pool.QueryRow(ctx, `SELECT username, teams, admin, verified, csrf, expires_at
		FROM console_session WHERE id_hash = $1 AND expires_at > now()`, idHash).
		Scan(&cs.Username, &cs.Teams, &cs.Admin, &cs.Verified, &cs.CSRF, &cs.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return ConsoleSession{}, ErrNoConsoleSession
	}
	if err != nil {
		return ConsoleSession{}, translate(fmt.Errorf("read console session: %w", err))
	}
	return cs, nil
}

// DeleteConsoleSession ends one session (sign-out); an unknown id is no error.
func (s *Store) DeleteConsoleSession(ctx context.Context, idHash []byte) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM console_session WHERE id_hash = $1`, idHash); err != nil {
		return translate(fmt.Errorf("delete console session: %w", err))
	}
	return nil
}
