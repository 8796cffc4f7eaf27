package store

import (
	"context"
	"fmt"
)

// InstallationID is the id of this installation, created with the schema (migration 0006).
// The synchronizer labels everything it creates with it and touches nothing labelled with
// another, so an installation is its database, not its namespace or its flags.
func (s *Store) InstallationID(ctx context.Context) (string, error) {
	var id string
	if err := s.pool.QueryRow(ctx, `SELECT id::text FROM installation`).Scan(&id); err != nil {
		return "", translate(fmt.Errorf("read installation id: %w", err))
	}
	return id, nil
}
