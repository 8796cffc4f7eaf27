package cli

import (
	"context"
	"fmt"
	"io"
	"net"

	"github.com/datajobs/datajobs/internal/devenv"
	"github.com/datajobs/datajobs/internal/httpapi"
)

type devJobAPIKey struct{}

// forwardDevJobAPI gives the real node's pods their way to the API dev serves on
// loopback: a forward from the node's gateway, on the same port (docs/test-environment.md,
// "Pod network"), whose URL the service hands to job pods as --job-api-url. It serves the
// pods only the routes of a job's own token, and only to that token (httpapi.JobsOnly):
// the API behind it trusts every caller as an admin (auth mode none), and any pod reaches
// the gateway (issue 41, M4). Without a real node it does nothing. The forward is closed
// by the returned function.
func forwardDevJobAPI(ctx context.Context, env *devenv.Env, listen string, out io.Writer) (context.Context, func() error, error) {
	if env.Node == nil {
		return ctx, func() error { return nil }, nil
	}
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		return ctx, nil, fmt.Errorf("--listen %q: %w", listen, err)
	}
	fwd, err := devenv.StartForward(net.JoinHostPort(env.Node.Gateway, port), listen, httpapi.JobsOnly)
	if err != nil {
		return ctx, nil, fmt.Errorf("forward the API to the real node's pods: %w", err)
	}
	url := "http://" + fwd.Addr
	fmt.Fprintf(out, "  job api:     %s (how the real node's pods reach the API: only the routes of a job's token, with it)\n", url)
	return context.WithValue(ctx, devJobAPIKey{}, url), fwd.Close, nil
}

// devJobAPIURL is the URL forwardDevJobAPI made for job pods, or "".
func devJobAPIURL(ctx context.Context) string {
	url, _ := ctx.Value(devJobAPIKey{}).(string)
	return url
}
