package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testenv"
)

// Issue 41, L6: a team's manual executions had no bound (backfills × max_parallel × jobs,
// or a start of each of its jobs): one team could fill the cluster. A start past the
// team's bound is refused (409); another team's start is not.
func TestATeamsManualExecutionsAreBounded(t *testing.T) {
	t.Parallel()
	s, err := store.Open(t.Context(), store.Config{URL: testenv.DatabaseURL(t), Quotas: store.TeamQuotas{MaxActiveExecutions: 2}})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	start := func(team, name string) error {
		_, err := s.CreateJob(t.Context(), job.Job{Name: name, Team: team})
		require.NoError(t, err)
		_, err = s.StartExecution(t.Context(), team, name, func(job.JobState) (job.NewExecution, error) {
			return job.NewExecution{ID: name + "-1", OpID: "op", StartedBy: "alice", Start: time.Now()}, nil
		})
		return err
	}
	require.NoError(t, start("team-a", "job-one"))
	require.NoError(t, start("team-a", "job-two"))
	err = start("team-a", "job-three")
	require.Equal(t, job.KindConflict, job.KindOf(err), "%v", err)
	require.Contains(t, err.Error(), "2 manual executions")
	require.NoError(t, start("team-b", "job-four"), "another team has its own bound")
}
