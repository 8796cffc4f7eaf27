package store

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationLockKey is the advisory lock that serialises migrations across replicas.
const migrationLockKey = 0x6461_7461_6a6f_6273 // "datajobs"

// Migrate applies every embedded migration not yet applied, each in its own transaction,
// under a session advisory lock so that replicas starting together migrate once.
// It returns the versions it applied.
func (s *Store) Migrate(ctx context.Context) ([]int, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, translate(fmt.Errorf("migrate: acquire connection: %w", err))
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, int64(migrationLockKey)); err != nil {
		return nil, translate(fmt.Errorf("migrate: lock: %w", err))
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, int64(migrationLockKey)) //nolint:errcheck // the session ends with the connection anyway
	// A migration may rewrite a large table: the API's statement timeout does not apply.
	if _, err := conn.Exec(ctx, `SET statement_timeout = 0`); err != nil {
		return nil, translate(fmt.Errorf("migrate: %w", err))
	}
	defer conn.Exec(context.WithoutCancel(ctx), `RESET statement_timeout`) //nolint:errcheck // reset for the pool's next user

	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return nil, translate(fmt.Errorf("migrate: create schema_migrations: %w", err))
	}
	migrations, err := loadMigrations()
	if err != nil {
		return nil, err
	}
	var applied []int
	for _, m := range migrations {
		done := false
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2) ON CONFLICT DO NOTHING`, m.version, m.name)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				done = true
				return nil
			}
			_, err = tx.Exec(ctx, m.sql)
			return err
		})
		if err != nil {
			return applied, translate(fmt.Errorf("migrate: apply %s: %w", m.name, err))
		}
		if !done {
			applied = append(applied, m.version)
		}
	}
	return applied, nil
}

type migration struct {
	version int
	name    string
	sql     string
}

func loadMigrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, fmt.Errorf("read embedded migrations: %w", err)
	}
	var ms []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		version, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration %s: name must start with a number and an underscore", e.Name())
		}
		body, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		ms = append(ms, migration{version: version, name: e.Name(), sql: string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i := 1; i < len(ms); i++ {
		// schema_migrations is keyed by version: the second of two files with one version
		// would be recorded as applied and never run.
		if ms[i].version == ms[i-1].version {
			return nil, fmt.Errorf("migrations %s and %s have the same version %d: renumber one", ms[i-1].name, ms[i].name, ms[i].version)
		}
	}
	return ms, nil
}
