package synchronizer

import (
	"context"
	"fmt"
	"log/slog"

	"k8s.io/client-go/informers"
)

// The objects the synchronizer keeps beside the CronJobs (the profiles' placements
// ConfigMap, the teams' OAuth Secrets) are watched, planned and written alike: what is
// shared lives here.

// startInformers starts factory's informers and returns their stop, which ends them and
// waits until they have: Shutdown alone would wait forever for informers still running.
func startInformers(ctx context.Context, factory informers.SharedInformerFactory) (stop func()) {
	informerCtx, cancel := context.WithCancel(ctx)
	factory.Start(informerCtx.Done())
	return func() {
		cancel()
		factory.Shutdown()
	}
}

// planEvents is the prefix of the log events of one kind of object's plan
// (profile_placements, team_oauth_secret); an event is the prefix and what happened
// (_conflict, _kept, _planned, _failed, _written).
type planEvents string

func (e planEvents) log(ctx context.Context, log *slog.Logger, level slog.Level, what string, args ...any) {
	//nolint:sloglint // a constant prefix of each kind of plan, fixed where its executor names it (the docs name the events)
	log.Log(ctx, level, string(e)+what, args...)
}

// writeDue reports whether a plan's action is a write to do now. When it is not, it logs
// why: _conflict (a warning), _kept, or _planned (dry-run mode); an unchanged object is
// not logged.
func (t *term) writeDue(ctx context.Context, log *slog.Logger, events planEvents, action Action) bool {
	switch {
	case action == ActionUnchanged:
		return false
	case action == ActionConflict:
		events.log(ctx, log, slog.LevelWarn, "_conflict")
		return false
	case !action.writesKubernetes():
		events.log(ctx, log, slog.LevelInfo, "_kept")
		return false
	case t.s.cfg.DryRun:
		events.log(ctx, log, slog.LevelInfo, "_planned", "dry_run", true)
		return false
	}
	return true
}

// logWrite logs the outcome of a plan's write, _written or _failed, and returns its error
// wrapped with what: the sync queue logs no failure of its own, the reconcile does (and
// the queue retries it with backoff).
func logWrite(ctx context.Context, log *slog.Logger, events planEvents, err error, what string) error {
	if err != nil {
		events.log(ctx, log, slog.LevelWarn, "_failed", "error", err)
		return fmt.Errorf("%s: %w", what, err)
	}
	events.log(ctx, log, slog.LevelInfo, "_written")
	return nil
}
