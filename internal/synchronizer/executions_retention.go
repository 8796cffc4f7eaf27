package synchronizer

import (
	"context"
	"errors"

	"github.com/datajobs/datajobs/internal/job"
)

// cleanup deletes the finished executions, then the finished backfills, beyond the
// retention (ExecutionConfig.Retention: the same bounds for both), fenced: a deposed
// leader deletes nothing.
func (t *execTerm) cleanup(ctx context.Context) {
	for _, c := range []struct {
		what string
		del  func(context.Context, job.Fence, job.Retention) (int, error)
	}{{"executions", t.x.db.DeleteExpiredExecutions}, {"backfills", t.x.db.DeleteExpiredBackfills}} {
		n, err := c.del(ctx, t.fence, t.x.cfg.Retention)
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				t.x.log.WarnContext(ctx, c.what+"_cleanup_failed", "error", err)
			}
			return
		}
		if n > 0 {
			t.x.log.InfoContext(ctx, c.what+"_cleaned", "deleted", n)
		}
	}
}
