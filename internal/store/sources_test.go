package store_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/testenv"
)

func TestSources(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	src := func(version, archive string) job.Sources {
		return job.Sources{Version: version, Archive: []byte(archive), Reason: "r", UploadedBy: "u", UploadedAt: at}
	}

	t.Run("a missing job is not found, a job without sources has none", func(t *testing.T) {
		t.Parallel()
		s, ctx := testenv.Store(t), t.Context()
		require.Equal(t, job.KindNotFound, job.KindOf(s.SaveSources(ctx, "team-a", "my-job", src("v1", "a"), 0)))
		_, err := s.GetSources(ctx, "team-a", "my-job", "")
		require.Equal(t, job.KindNotFound, job.KindOf(err))
		require.Equal(t, job.KindNotFound, job.KindOf(s.DeleteSources(ctx, "team-a", "my-job")))

		_, err = s.CreateJob(ctx, job.Job{Name: "my-job", Team: "team-a"})
		require.NoError(t, err)
		_, err = s.GetSources(ctx, "team-a", "my-job", "")
		require.ErrorIs(t, err, job.ErrNoSources)
		_, err = s.GetSources(ctx, "team-b", "my-job", "")
		require.Equal(t, job.KindNotFound, job.KindOf(err), "another team's job")
	})

	t.Run("concurrent uploads of the same version store it once and all succeed", func(t *testing.T) {
		t.Parallel()
		s, ctx := testenv.Store(t), t.Context()
		_, err := s.CreateJob(ctx, job.Job{Name: "my-job", Team: "team-a"})
		require.NoError(t, err)
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Go(func() { errs[i] = s.SaveSources(ctx, "team-a", "my-job", src("v1", "archive"), 0) })
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		got, err := s.GetSources(ctx, "team-a", "my-job", "")
		require.NoError(t, err)
		require.Equal(t, src("v1", "archive"), got)
	})

	t.Run("the latest upload wins, also when it repeats an older version", func(t *testing.T) {
		t.Parallel()
		s, ctx := testenv.Store(t), t.Context()
		_, err := s.CreateJob(ctx, job.Job{Name: "my-job", Team: "team-a"})
		require.NoError(t, err)
		require.NoError(t, s.SaveSources(ctx, "team-a", "my-job", src("v1", "one"), 0))
		require.NoError(t, s.SaveSources(ctx, "team-a", "my-job", src("v2", "two"), 0))
		latest := func() job.Sources {
			got, err := s.GetSources(ctx, "team-a", "my-job", "")
			require.NoError(t, err)
			return got
		}
		require.Equal(t, "v2", latest().Version)
		again := src("v1", "other bytes, same files")
		again.Reason = "again"
		require.NoError(t, s.SaveSources(ctx, "team-a", "my-job", again, 0))
		got := latest()
		require.Equal(t, "v1", got.Version)
		require.Equal(t, "one", string(got.Archive), "the archive first stored stays")
		require.Equal(t, "again", got.Reason)

		require.NoError(t, s.DeleteSources(ctx, "team-a", "my-job"))
		_, err = s.GetSources(ctx, "team-a", "my-job", "v2")
		require.ErrorIs(t, err, job.ErrNoSources)
	})
}
