package synchronizer

import (
	"context"
	"errors"
)

// cleanup deletes the finished executions, then the finished backfills, beyond the
// retention (ExecutionConfig.Retention: the same bounds for both), fenced: a deposed
// leader deletes nothing.
func (t *execTerm) cleanup(ctx context.Context) {
	n, err := t.x.db.DeleteExpiredExecutions(ctx, t.fence, t.x.cfg.Retention)
	if t.cleaned(ctx, "executions", n, err) {
		n, err = t.x.db.DeleteExpiredBackfills(ctx, t.fence, t.x.cfg.Retention)
		t.cleaned(ctx, "backfills", n, err)
	}
}

// cleaned logs what a retention statement of rows (executions, backfills) did and
// reports whether it succeeded.
func (t *execTerm) cleaned(ctx context.Context, rows string, n int, err error) bool {
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			t.x.log.WarnContext(ctx, "retention_cleanup_failed", "rows", rows, "error", err)
		}
		return false
	}
	if n > 0 {
		t.x.log.InfoContext(ctx, "retention_cleaned", "rows", rows, "deleted", n)
	}
	return true
}
