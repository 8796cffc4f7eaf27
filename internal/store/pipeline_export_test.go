package store

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// SendTwice sends one pipeline twice in a transaction, a statement counting itself (in a
// transaction-local setting) queued before each send, and returns the count: a pipeline's
// first statements run once.
const count = `SELECT set_config('datajobs.sends', (COALESCE(NULLIF(current_setting('datajobs.sends', true), ''), '0')::int + 1)::text, true)`

func SendTwice(ctx context.Context, s *Store) (sends int, err error) {
	err = s.InTx(ctx, func(tx Tx) error {
		var p pipeline
		p.exec(wrapped("count 1"), count)
		if err := p.send(ctx, tx); err != nil {
			return err
		}
		p.exec(wrapped("count 2"), count)
		p.queryRow(func(r pgx.Row) error { return r.Scan(&sends) }, `SELECT current_setting('datajobs.sends')::int`)
		return p.send(ctx, tx)
	})
	return sends, err
}
