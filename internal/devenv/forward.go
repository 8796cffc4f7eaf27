package devenv

import (
	"errors"
	"io"
	"net"
	"sync"
)

// Forward is a TCP port-forward: what connects to its address is joined to a new
// connection to its target. It is how the real node's pods reach a service that listens
// on 127.0.0.1 (the API of `datajobs dev` and of the tests): a forward on the node's
// gateway address, as a Kubernetes Service forwards to its pods in a cluster. The service
// keeps its loopback address (the console's URL, nothing open to the machine's network),
// and no iptables rule is needed. The service sees the forward's loopback address as the
// caller's: a job is told apart by its token, never by its address.
type Forward struct {
	// Addr is the address the forward listens on, host:port.
	Addr string

	l      net.Listener
	target string
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// StartForward listens on listen (host:port; port 0 picks one) and forwards every
// connection to target until Close.
func StartForward(listen, target string) (*Forward, error) {
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	f := &Forward{Addr: l.Addr().String(), l: l, target: target, conns: map[net.Conn]struct{}{}}
	f.wg.Go(f.accept)
	return f, nil
}

func (f *Forward) accept() {
	for {
		c, err := f.l.Accept()
		if err != nil {
			return // closed
		}
		if !f.track(c) {
			c.Close()
			return
		}
		f.wg.Go(func() { f.join(c) })
	}
}

// join copies both ways between c and a new connection to the target, passing each
// side's end of writing on as a half close, until both are done.
func (f *Forward) join(c net.Conn) {
	defer f.untrack(c)
	t, err := net.Dial("tcp", f.target)
	if err != nil {
		return
	}
	if !f.track(t) {
		t.Close()
		return
	}
	defer f.untrack(t)
	var copies sync.WaitGroup
	half := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tcp, ok := dst.(*net.TCPConn); ok {
			_ = tcp.CloseWrite()
		}
	}
	copies.Go(func() { half(t, c) })
	half(c, t)
	copies.Wait()
}

func (f *Forward) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *Forward) untrack(c net.Conn) {
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
	c.Close()
}

// Close stops listening, closes every forwarded connection and waits for them.
func (f *Forward) Close() error {
	f.mu.Lock()
	f.closed = true
	conns := make([]net.Conn, 0, len(f.conns))
	for c := range f.conns {
		conns = append(conns, c)
	}
	f.mu.Unlock()
	err := f.l.Close()
	for _, c := range conns {
		c.Close()
	}
	f.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
