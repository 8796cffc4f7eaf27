package store

import (
	"context"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/secrets"
)

// TargetView is the store as the synchronizer shard of one execution target reads it:
// that target's actual rows, intents and runs, and the jobs of the teams that run there
// (a job of another target's team read by name is job.SyncState.Elsewhere). Its writes
// are the Store's: each fenced write records the target of the shard whose term wrote it
// (shardTarget), so a view needs none of its own. The Store's own reads are the default
// target's view.
type TargetView struct {
	*Store
	target string
}

// Target returns the view of the execution target name's shard.
func (s *Store) Target(name string) TargetView {
	return TargetView{Store: s, target: name}
}

// TargetName is the view's target.
func (v TargetView) TargetName() string { return v.target }

// LoadSyncState is Store.LoadSyncState as the target's shard sees it.
func (v TargetView) LoadSyncState(ctx context.Context, name string) (job.SyncState, error) {
	return loadSyncState(ctx, v.pool, v.target, name)
}

// LoadAllSyncStates is Store.LoadAllSyncStates as the target's shard sees it.
func (v TargetView) LoadAllSyncStates(ctx context.Context) (map[string]job.SyncState, error) {
	return loadSyncStates(ctx, v.pool, v.target, nil)
}

// LoadSyncChanges is Store.LoadSyncChanges as the target's shard sees it.
func (v TargetView) LoadSyncChanges(ctx context.Context, since SyncCursor) (SyncChanges, error) {
	return v.loadSyncChanges(ctx, v.target, since)
}

// JobsElsewhere is Store.JobsElsewhere as the target's shard sees it.
func (v TargetView) JobsElsewhere(ctx context.Context, names []string) (map[string]bool, error) {
	return v.jobsElsewhere(ctx, v.target, names)
}

// ActiveExecutions is Store.ActiveExecutions of the target.
func (v TargetView) ActiveExecutions(ctx context.Context) ([]job.TrackedExecution, error) {
	return v.activeExecutions(ctx, v.target)
}

// LoadExecution is Store.LoadExecution of the target.
func (v TargetView) LoadExecution(ctx context.Context, id string) (job.TrackedExecution, bool, error) {
	return v.loadExecution(ctx, v.target, id)
}

// DeliveredTeamOAuth is Store.DeliveredTeamOAuth of the teams that run in the target.
func (v TargetView) DeliveredTeamOAuth(ctx context.Context) ([]secrets.TeamOAuth, error) {
	return v.deliveredTeamOAuth(ctx, v.target)
}

// ScheduleWatches is Store.ScheduleWatches of the jobs whose CronJobs are in the target:
// the missed runs of a shard are told by its tracker's Jobs.
func (v TargetView) ScheduleWatches(ctx context.Context) ([]job.ScheduleWatch, error) {
	return v.scheduleWatches(ctx, v.target)
}

// LatenessWatches is Store.LatenessWatches of the jobs whose CronJobs are in the target.
func (v TargetView) LatenessWatches(ctx context.Context) ([]job.LatenessWatch, error) {
	return v.latenessWatches(ctx, v.target)
}
