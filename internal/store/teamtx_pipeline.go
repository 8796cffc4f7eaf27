package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/datajobs/datajobs/internal/gitops"
)

// queuedTx is the transaction of an apply (TeamTx): the API's writes run on it unchanged,
// but what needs no answer (each write's pipeline: revisions, notifications, a
// deployment's upsert) is queued and goes to the server with the next statement that
// needs one (a job's insert or update, read by its Scan), in one round trip. An apply of
// 1,000 changed jobs sent about five round trips a job (bench/gitops: 8,008 statements in
// 2.1 s at load 7); the server still runs the statements one after the other, in order,
// so that a statement reads what the queued ones before it wrote.
//
// A queued statement's failure comes back with the statement sent next, possibly an
// other object's: it is an *gitops.ObjectError naming the object that queued it (of),
// so that the apply names that object.
type queuedTx struct {
	pgx.Tx
	queued pgx.Batch
	// of is the object whose writes are being queued.
	of gitops.ObjectError
}

// writing makes kind/name the object of the statements queued from now on.
func (t *queuedTx) writing(kind, name string) { t.of = gitops.ObjectError{Kind: kind, Name: name} }

// flush sends what is queued, then the statement of last (nil: none) in the same round
// trip.
func (t *queuedTx) flush(ctx context.Context, last func(b *pgx.Batch)) error {
	if last != nil {
		last(&t.queued)
	}
	if t.queued.Len() == 0 {
		return nil
	}
	b := t.queued
	t.queued = pgx.Batch{}
	return t.Tx.SendBatch(ctx, &b).Close()
}

// SendBatch queues b's statements, each failure to be reported as the object's that
// queues it; the results' Close reports nothing (their failures come with a later
// statement).
func (t *queuedTx) SendBatch(_ context.Context, b *pgx.Batch) pgx.BatchResults {
	of := t.of
	for _, q := range b.QueuedQueries {
		fn := q.Fn
		t.queued.Queue(q.SQL, q.Arguments...).Fn = func(br pgx.BatchResults) error {
			var err error
			if fn != nil {
				err = fn(br)
			} else {
				_, err = br.Exec()
			}
			if err == nil || retryable(err) { // a deadlock's victim is the whole transaction's: InTx runs it again
				return err
			}
			out := of
			out.Err = err
			return &out
		}
	}
	return queuedResults{}
}

// QueryRow answers a row whose Scan sends what is queued with the query.
func (t *queuedTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return queuedRow{t: t, ctx: ctx, sql: sql, args: args}
}

// Exec sends what is queued with sql.
func (t *queuedTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	var tag pgconn.CommandTag
	err := t.flush(ctx, func(b *pgx.Batch) {
		b.Queue(sql, args...).Fn = func(br pgx.BatchResults) (err error) {
			tag, err = br.Exec()
			return err
		}
	})
	return tag, err
}

// Query sends what is queued, then the query.
func (t *queuedTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := t.flush(ctx, nil); err != nil {
		return failedRows{err: err}, err
	}
	return t.Tx.Query(ctx, sql, args...)
}

// CopyFrom sends what is queued, then copies.
func (t *queuedTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.flush(ctx, nil); err != nil {
		return 0, err
	}
	return t.Tx.CopyFrom(ctx, table, cols, src)
}

// Begin sends what is queued, then starts a savepoint.
func (t *queuedTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if err := t.flush(ctx, nil); err != nil {
		return nil, err
	}
	return t.Tx.Begin(ctx)
}

type queuedRow struct {
	t    *queuedTx
	ctx  context.Context //nolint:containedctx // the row's Scan sends the statement
	sql  string
	args []any
}

func (r queuedRow) Scan(dest ...any) error {
	return r.t.flush(r.ctx, func(b *pgx.Batch) {
		b.Queue(r.sql, r.args...).Fn = func(br pgx.BatchResults) error { return br.QueryRow().Scan(dest...) }
	})
}

// queuedResults are the results of a queued batch: its statements are not sent yet.
type queuedResults struct{}

var errQueued = errors.New("the batch is queued: its results come with the next statement")

func (queuedResults) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, errQueued }
func (queuedResults) Query() (pgx.Rows, error)         { return failedRows{err: errQueued}, errQueued }
func (queuedResults) QueryRow() pgx.Row                { return failedRows{err: errQueued} }
func (queuedResults) Close() error                     { return nil }
func (queuedResults) Tx() pgx.Tx                       { return nil }

// failedRows are the rows of a query that was not sent: err says why.
type failedRows struct{ err error }

func (failedRows) Close()                                       {}
func (r failedRows) Err() error                                 { return r.err }
func (failedRows) CommandTag() pgconn.CommandTag                { return pgconn.CommandTag{} }
func (failedRows) FieldDescriptions() []pgconn.FieldDescription { return nil }
func (failedRows) Next() bool                                   { return false }
func (r failedRows) Scan(...any) error                          { return r.err }
func (r failedRows) Values() ([]any, error)                     { return nil, r.err }
func (failedRows) RawValues() [][]byte                          { return nil }
func (failedRows) Conn() *pgx.Conn                              { return nil }
func (failedRows) TypeMap() *pgtype.Map                         { return nil }
