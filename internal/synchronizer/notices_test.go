package synchronizer_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/synchronizer"
	"github.com/datajobs/datajobs/internal/testenv"
)

// loadSpy is a shard's store that records the names whose state it reads one by one.
type loadSpy struct {
	synchronizer.Store
	mu    sync.Mutex
	names []string
}

func (s *loadSpy) LoadSyncState(ctx context.Context, name string) (job.SyncState, error) {
	s.mu.Lock()
	s.names = append(s.names, name)
	s.mu.Unlock()
	return s.Store.LoadSyncState(ctx, name)
}

// reads is how many times the shard read name's state.
func (s *loadSpy) reads(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for i := range s.names {
		if s.names[i] == name {
			n++
		}
	}
	return n
}

// seen returns the names whose state the shard read.
func (s *loadSpy) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.names)
}

// Every shard hears the NOTIFY of every job of every target. A shard queued each one and
// read its state by name to learn that it was another target's: every change of another
// target cost a read and a place in the queue of every shard, and in a converge of all
// targets each replica's queue held every target's jobs (docs/benchmarks.md, "Execution
// targets"). The second shard here reconciles its own job's new deployment and change,
// and reads none of the default target's job's deployment and three changes.
func TestAShardReadsNoStateOfAnotherTargetsJobOnItsNotify(t *testing.T) {
	t.Parallel()
	second := job.Target{Name: "second", Namespace: testenv.Namespace(t), DefaultFor: []string{moverTeam}}
	f := newWithTarget(t, second)
	spy := &loadSpy{Store: f.db.Target(second.Name)}
	f.shardOn(second, spy)
	f.deployStaysPutAndMover()
	f.synced("stays-put")
	f.eventually(func() bool { return f.actualTarget(mover) == second.Name }, "the mover's CronJob recorded in the second target")

	for _, enabled := range []bool{false, true, false} {
		f.patch("stays-put", job.DeploymentChange{Enabled: &enabled})
	}
	// The shard hears the changes in their order: once it read the mover's change,
	// it heard those of stays-put before it.
	before := spy.reads(mover)
	disabled := false
	_, err := f.svc.PatchDeployment(t.Context(), moverTeam, mover, job.DeploymentChange{Enabled: &disabled}, "bob")
	require.NoError(t, err)
	f.eventually(func() bool { return spy.reads(mover) > before }, "the second shard reads its own job's change")
	f.synced("stays-put")
	require.Never(t, func() bool { return spy.reads("stays-put") > 0 }, time.Second, 20*time.Millisecond,
		"the second shard read the default target's job: %v", spy.seen())
}
