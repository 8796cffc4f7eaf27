package synchronizer_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
)

// A replica shows the latest plans only while it leads. Once its term ended (another
// replica took the shard over) it still showed, and held, its last plan of every job of
// the shard: a replica that had led a shard for the seconds before two replicas split
// them held a plan of each of that shard's jobs for as long as it ran.
func TestTheLatestPlansEndWithTheTerm(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.synchronizer(false)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Run(ctx, f.epoch)
	}()
	f.createJob("planned")
	f.deploy("planned", job.DeploymentChange{JobVersion: ptr("v1")})
	f.synced("planned")
	require.NotEmpty(t, s.LatestPlans(), "the leader's plans")
	cancel()
	<-done
	require.Empty(t, s.LatestPlans(), "the plans of a term that ended")
}
