package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testenv"
)

// listening is one Listen call run in the background: its notifications and its end.
type listening struct {
	ready    chan struct{}
	payloads chan string
	ended    chan error
	cancel   context.CancelFunc
}

func listenIn(t *testing.T, st *store.Store, channel string) *listening {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	l := &listening{ready: make(chan struct{}), payloads: make(chan string, 10), ended: make(chan error, 1), cancel: cancel}
	var once sync.Once
	go func() {
		l.ended <- st.Listen(ctx, channel, func() { once.Do(func() { close(l.ready) }) }, func(p string) { l.payloads <- p })
	}()
	t.Cleanup(cancel)
	select {
	case <-l.ready:
	case err := <-l.ended:
		t.Fatalf("listen on %s ended before it listened: %v", channel, err)
	case <-time.After(time.Minute):
		t.Fatalf("listen on %s never listened", channel)
	}
	return l
}

func (l *listening) next(t *testing.T) string {
	t.Helper()
	select {
	case p := <-l.payloads:
		return p
	case <-time.After(time.Minute):
		t.Fatal("no notification arrived")
		return ""
	}
}

// Every Listen of a Store shares one connection: a leader's four or five listens held a
// connection each (the synchronizer's two, the tracker's, the backfills'), connections
// that only wait. Each subscription still gets exactly its channel's notifications, one
// ending leaves the others listening, and the connection's failure ends every one of
// them with an error (their callers reconnect and resync).
func TestListensOfAStoreShareOneConnection(t *testing.T) {
	t.Parallel()
	dbURL := testenv.DatabaseURL(t)
	st, err := store.Open(t.Context(), store.Config{URL: dbURL})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	admin, err := pgx.Connect(t.Context(), dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { admin.Close(context.Background()) })

	desired, executions := listenIn(t, st, "share_desired"), listenIn(t, st, "share_executions")
	alsoDesired := listenIn(t, st, "share_desired")
	listeners := func() (n int) {
		require.NoError(t, admin.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND query LIKE 'LISTEN%'`).Scan(&n))
		return n
	}
	require.Equal(t, 1, listeners(), "three listens on two channels hold one connection")

	send := func(channel, payload string) {
		_, err := admin.Exec(t.Context(), "SELECT pg_notify($1, $2)", channel, payload)
		require.NoError(t, err)
	}
	send("share_desired", "job-a")
	send("share_executions", "run-1")
	require.Equal(t, "job-a", desired.next(t))
	require.Equal(t, "job-a", alsoDesired.next(t), "both subscriptions of a channel get its notification")
	require.Equal(t, "run-1", executions.next(t))
	require.Empty(t, executions.payloads, "a subscription gets only its own channel's notifications")

	desired.cancel()
	require.ErrorIs(t, <-desired.ended, context.Canceled)
	send("share_desired", "job-b")
	require.Equal(t, "job-b", alsoDesired.next(t), "one subscription ending leaves the others listening")

	var killed int
	require.NoError(t, admin.QueryRow(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN%'`).Scan(&killed))
	require.Equal(t, 1, killed)
	for _, l := range []*listening{alsoDesired, executions} {
		select {
		case err := <-l.ended:
			require.Error(t, err, "the connection's failure ends every subscription")
		case <-time.After(time.Minute):
			t.Fatal("a subscription outlived its connection")
		}
	}
	again := listenIn(t, st, "share_executions")
	send("share_executions", "run-2")
	require.Equal(t, "run-2", again.next(t), "a Listen after the failure listens on a new connection")
}
