package synchronizer

import (
	"context"
	"errors"
)

// cleanup deletes the finished executions beyond the retention (ExecutionConfig.Retention),
// fenced: a deposed leader deletes nothing.
func (t *execTerm) cleanup(ctx context.Context) {
	n, err := t.x.db.DeleteExpiredExecutions(ctx, t.fence, t.x.cfg.Retention)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			t.x.log.WarnContext(ctx, "executions_cleanup_failed", "error", err)
		}
		return
	}
	if n > 0 {
		t.x.log.InfoContext(ctx, "executions_cleaned", "deleted", n)
	}
}
