package devenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"
)

// Forward is an HTTP forward: the requests it lets through are sent on to an HTTP
// server. It is how the real node's pods reach a service that listens on 127.0.0.1 (the
// API of `datajobs dev` and of the tests): a forward on the node's gateway address, as a
// Kubernetes Service forwards to its pods in a cluster. The service keeps its loopback
// address (the console's URL, nothing open to the machine's network), and no iptables rule
// is needed. It forwards requests, not bytes, so that it can choose which it serves (dev's
// serves the pods only the job-token routes: httpapi.JobsOnly, issue 41 M4), and the
// service sees its own loopback address as Host and the forward's as the caller's: a job
// is told apart by its token, never by its address.
type Forward struct {
	// Addr is the address the forward listens on, host:port.
	Addr string

	srv    *http.Server
	served chan error
}

// forwardShutdown bounds how long Close waits for requests under way.
const forwardShutdown = 5 * time.Second

// StartForward listens on listen (host:port; port 0 picks one) and forwards every
// request that wrap lets through (all when wrap is nil) to the HTTP server at target
// (host:port) until Close.
func StartForward(listen, target string, wrap func(http.Handler) http.Handler) (*Forward, error) {
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("forward %s: %w", listen, err)
	}
	to := &url.URL{Scheme: "http", Host: target}
	var h http.Handler = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(to) }, // Host: the target's
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, "forward to "+target+": "+err.Error(), http.StatusBadGateway)
		},
	}
	if wrap != nil {
		h = wrap(h)
	}
	f := &Forward{
		Addr:   l.Addr().String(),
		srv:    &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10},
		served: make(chan error, 1),
	}
	go func() { f.served <- f.srv.Serve(l) }()
	return f, nil
}

// Close stops listening and waits for the requests under way (forwardShutdown at most,
// then closes their connections) and for the server to return.
func (f *Forward) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), forwardShutdown)
	defer cancel()
	err := f.srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, f.srv.Close())
	}
	if served := <-f.served; !errors.Is(served, http.ErrServerClosed) {
		err = errors.Join(err, served)
	}
	return err
}
