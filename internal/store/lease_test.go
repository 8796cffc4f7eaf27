package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testenv"
)

const hour = time.Hour

func TestLeaseTerms(t *testing.T) {
	t.Parallel()

	t.Run("a free lease is taken at epoch 1 and the holder keeps its epoch while it holds it", func(t *testing.T) {
		t.Parallel()
		s, ctx := testenv.Store(t), t.Context()
		epoch, ok, err := s.TryAcquireLease(ctx, "l", "a", hour)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, int64(1), epoch)

		again, ok, err := s.TryAcquireLease(ctx, "l", "a", hour)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, epoch, again)

		renewed, err := s.RenewLease(ctx, "l", "a", epoch, hour)
		require.NoError(t, err)
		require.True(t, renewed)

		holder, got, expires, err := s.LeaseHolder(ctx, "l")
		require.NoError(t, err)
		require.Equal(t, "a", holder)
		require.Equal(t, epoch, got)
		require.True(t, expires.After(time.Now().Add(hour/2)), "expires at %s", expires)
	})

	t.Run("another holder cannot take a held lease", func(t *testing.T) {
		t.Parallel()
		s, ctx := testenv.Store(t), t.Context()
		_, _, err := s.TryAcquireLease(ctx, "l", "a", hour)
		require.NoError(t, err)
		_, ok, err := s.TryAcquireLease(ctx, "l", "b", hour)
		require.NoError(t, err)
		require.False(t, ok)
		holder, _, _, err := s.LeaseHolder(ctx, "l")
		require.NoError(t, err)
		require.Equal(t, "a", holder)
	})

	t.Run("a released lease goes to the next holder at a larger epoch and the old term is over", func(t *testing.T) {
		t.Parallel()
		s, ctx := testenv.Store(t), t.Context()
		old, _, err := s.TryAcquireLease(ctx, "l", "a", hour)
		require.NoError(t, err)
		require.NoError(t, s.ReleaseLease(ctx, "l", "a", old))

		epoch, ok, err := s.TryAcquireLease(ctx, "l", "b", hour)
		require.NoError(t, err)
		require.True(t, ok)
		require.Greater(t, epoch, old)

		renewed, err := s.RenewLease(ctx, "l", "a", old, hour)
		require.NoError(t, err)
		require.False(t, renewed)
		require.NoError(t, s.ReleaseLease(ctx, "l", "a", old), "releasing an ended term is a no-op")
		holder, got, _, err := s.LeaseHolder(ctx, "l")
		require.NoError(t, err)
		require.Equal(t, "b", holder)
		require.Equal(t, epoch, got)
	})

	t.Run("an expired lease goes to the next holder and cannot be renewed by the old one", func(t *testing.T) {
		t.Parallel()
		s, ctx := testenv.Store(t), t.Context()
		old, _, err := s.TryAcquireLease(ctx, "l", "a", 0) // expires at once
		require.NoError(t, err)
		renewed, err := s.RenewLease(ctx, "l", "a", old, hour)
		require.NoError(t, err)
		require.False(t, renewed, "an expired term is never revived")

		epoch, ok, err := s.TryAcquireLease(ctx, "l", "b", hour)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, old+1, epoch)
	})

	t.Run("the same holder starts a new term after its lease expired", func(t *testing.T) {
		t.Parallel()
		s, ctx := testenv.Store(t), t.Context()
		old, _, err := s.TryAcquireLease(ctx, "l", "a", 0)
		require.NoError(t, err)
		epoch, ok, err := s.TryAcquireLease(ctx, "l", "a", hour)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, old+1, epoch)
	})

	t.Run("a lease never taken has no holder", func(t *testing.T) {
		t.Parallel()
		s, ctx := testenv.Store(t), t.Context()
		holder, epoch, expires, err := s.LeaseHolder(ctx, "l")
		require.NoError(t, err)
		require.Empty(t, holder)
		require.Zero(t, epoch)
		require.True(t, expires.IsZero())
		held, err := testenv.HoldsLease(ctx, s, "l", 0)
		require.NoError(t, err)
		require.False(t, held)
	})
}

func TestLeaseRaceHasOneWinner(t *testing.T) {
	t.Parallel()
	s, ctx := testenv.Store(t), t.Context()
	const n = 8
	won := make(chan int64, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			epoch, ok, err := s.TryAcquireLease(ctx, "l", string(rune('a'+i)), hour)
			assert.NoError(t, err)
			if ok {
				won <- epoch
			}
		})
	}
	wg.Wait()
	close(won)
	var epochs []int64
	for e := range won {
		epochs = append(epochs, e)
	}
	require.Equal(t, []int64{1}, epochs)
}

func TestLeaseHeldConditionFencesWrites(t *testing.T) {
	t.Parallel()
	s, ctx := testenv.Store(t), t.Context()
	old, _, err := s.TryAcquireLease(ctx, "l", "a", hour)
	require.NoError(t, err)

	// fencedWrite inserts a row only while term epoch holds the lease, and reports whether
	// it did: the shape of every write the synchronizer makes.
	fencedWrite := func(epoch int64) bool {
		var n int64
		err := s.InTx(ctx, func(tx store.Tx) error {
			if _, err := tx.Exec(ctx, `CREATE TEMP TABLE fenced (v int) ON COMMIT DROP`); err != nil {
				return err
			}
			tag, err := tx.Exec(ctx, `INSERT INTO fenced SELECT 1 WHERE `+store.LeaseHeldCondition("$1", "$2"), "l", epoch)
			n = tag.RowsAffected()
			return err
		})
		require.NoError(t, err)
		return n == 1
	}
	require.True(t, fencedWrite(old))

	require.NoError(t, s.ReleaseLease(ctx, "l", "a", old))
	require.False(t, fencedWrite(old), "a released term cannot write")
	epoch, _, err := s.TryAcquireLease(ctx, "l", "b", hour)
	require.NoError(t, err)
	require.False(t, fencedWrite(old), "an old term cannot write after a takeover")
	require.True(t, fencedWrite(epoch))

	held, err := testenv.HoldsLease(ctx, s, "l", old)
	require.NoError(t, err)
	require.False(t, held)
	held, err = testenv.HoldsLease(ctx, s, "l", epoch)
	require.NoError(t, err)
	require.True(t, held)
}

// A takeover cannot slip between a leader's fenced check and its commit: it waits for the
// writing transaction, so every fenced write is ordered before the new term.
func TestLeaseTakeoverWaitsForFencedWriteInFlight(t *testing.T) {
	t.Parallel()
	s, ctx := testenv.Store(t), t.Context()
	old, _, err := s.TryAcquireLease(ctx, "l", "a", hour)
	require.NoError(t, err)

	checked, commit := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		err := s.InTx(ctx, func(tx store.Tx) error {
			var held bool
			if err := tx.QueryRow(ctx, `SELECT `+store.LeaseHeldCondition("$1", "$2"), "l", old).Scan(&held); err != nil {
				return err
			}
			assert.True(t, held)
			close(checked)
			<-commit
			return nil
		})
		assert.NoError(t, err)
	})
	<-checked

	// The old leader releases and another replica takes over, from other connections.
	next := make(chan int64, 1)
	wg.Go(func() {
		assert.NoError(t, s.ReleaseLease(ctx, "l", "a", old)) //nolint:testifylint // require must not run outside the test goroutine
		epoch, ok, err := s.TryAcquireLease(ctx, "l", "b", hour)
		assert.NoError(t, err) //nolint:testifylint // as above
		assert.True(t, ok)
		next <- epoch
	})
	require.Eventually(t, func() bool {
		var waiting bool
		err := s.InTx(ctx, func(tx store.Tx) error {
			return tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%leader_lease%')`).Scan(&waiting)
		})
		require.NoError(t, err)
		return waiting
	}, 30*time.Second, 10*time.Millisecond, "the release waits for the fenced transaction")
	select {
	case <-next:
		t.Fatal("took over while a fenced transaction was in flight")
	default:
	}
	close(commit)
	require.Equal(t, old+1, <-next)
}

// API load that takes every connection of the main pool does not delay the leader's
// renewal: the lease has connections of its own.
func TestLeaseRenewsWhileTheMainPoolIsSaturated(t *testing.T) {
	t.Parallel()
	url := testenv.DatabaseURL(t)
	s, err := store.Open(t.Context(), store.Config{URL: url, MaxConns: 2})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	other, err := store.Open(t.Context(), store.Config{URL: url, MaxConns: 1})
	require.NoError(t, err)
	t.Cleanup(other.Close)
	epoch, ok, err := s.TryAcquireLease(t.Context(), "saturated", "leader", hour)
	require.NoError(t, err)
	require.True(t, ok)

	// Two slow API transactions hold both connections of the main pool, waiting for a
	// lock another session holds until the end of the test.
	const lockKey = 0x5a7
	locked := make(chan struct{})
	unlock := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		assert.NoError(t, other.InTx(t.Context(), func(tx store.Tx) error {
			if _, err := tx.Exec(t.Context(), `SELECT pg_advisory_xact_lock($1)`, lockKey); err != nil {
				return err
			}
			close(locked)
			<-unlock
			return nil
		}))
	})
	<-locked
	for range 2 {
		wg.Go(func() {
			assert.NoError(t, s.InTx(t.Context(), func(tx store.Tx) error {
				_, err := tx.Exec(t.Context(), `SELECT pg_advisory_xact_lock($1)`, lockKey)
				return err
			}))
		})
	}
	defer wg.Wait()
	defer close(unlock)
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	require.Eventually(t, func() bool {
		var waiting int
		err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&waiting)
		return err == nil && waiting == 2
	}, time.Minute, 10*time.Millisecond, "both connections of the main pool busy")

	// Bounded only so that a renewal stuck behind the pool fails instead of hanging.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	ok, err = s.RenewLease(ctx, "saturated", "leader", epoch, hour)
	require.NoError(t, err, "renewal not delayed by the saturated pool")
	require.True(t, ok)
}
