package store_test

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testenv"
)

// A LISTEN connection that the network cuts silently (no FIN, no RST: a proxy or a
// failover dropping packets) ends Listen with an error within twice the keepalive, so
// that the caller reconnects and resyncs instead of waiting for notifications forever.
func TestListenNoticesASilentlyCutConnection(t *testing.T) {
	t.Parallel()
	dbURL := testenv.DatabaseURL(t)
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	proxy := newBlackholeProxy(t, u.Host)
	u.Host = proxy.addr
	st, err := store.Open(t.Context(), store.Config{URL: u.String(), ListenKeepalive: 300 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(st.Close)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ready, notified, ended := make(chan struct{}), make(chan string, 1), make(chan error, 1)
	go func() {
		ended <- st.Listen(ctx, "listen_test", func() { close(ready) }, func(p string) { notified <- p })
	}()
	<-ready
	notify(t, dbURL, "before the cut")
	require.Equal(t, "before the cut", <-notified, "notifications arrive through the proxy")
	time.Sleep(time.Second) // idle past the keepalive: the pings get their answers
	require.Empty(t, ended, "an idle connection that answers its pings is kept")

	proxy.blackhole()
	select {
	case err := <-ended:
		require.ErrorContains(t, err, "keepalive")
	case <-time.After(time.Minute): // twice the keepalive is 0.6 s; a minute is patience
		t.Fatal("Listen kept waiting on a connection that no longer answers")
	}
}

func notify(t *testing.T, dbURL, payload string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dbURL)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(t.Context()))
	_, err = conn.Exec(t.Context(), "SELECT pg_notify('listen_test', $1)", payload)
	require.NoError(t, err)
}

// blackholeProxy forwards TCP connections to a server until blackhole is called; from
// then on it drops every byte in both directions and closes nothing, as a network that
// silently lost the route does.
type blackholeProxy struct {
	addr string
	cut  atomic.Bool
}

func newBlackholeProxy(t *testing.T, server string) *blackholeProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &blackholeProxy{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			upstream, err := net.Dial("tcp", server)
			if err != nil {
				client.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, client, upstream)
			mu.Unlock()
			wg.Go(func() { p.pipe(upstream, client) })
			wg.Go(func() { p.pipe(client, upstream) })
		}
	})
	return p
}

// pipe copies from src to dst while the route is up, and swallows src's bytes after.
func (p *blackholeProxy) pipe(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.cut.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *blackholeProxy) blackhole() { p.cut.Store(true) }
