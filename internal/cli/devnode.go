package cli

import (
	"context"
	"fmt"
	"io"
	"net"

	"github.com/datajobs/datajobs/internal/devenv"
)

type devJobAPIKey struct{}

// forwardDevJobAPI gives the real node's pods their way to the API dev serves on
// loopback: a forward from the node's gateway, on the same port (docs/test-environment.md,
// "Pod network"), whose URL the service hands to job pods as --job-api-url. Without a real
// node it does nothing. The forward is closed by the returned function.
func forwardDevJobAPI(ctx context.Context, env *devenv.Env, listen string, out io.Writer) (context.Context, func() error, error) {
	if env.Node == nil {
		return ctx, func() error { return nil }, nil
	}
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		return ctx, nil, fmt.Errorf("--listen %q: %w", listen, err)
	}
	fwd, err := devenv.StartForward(net.JoinHostPort(env.Node.Gateway, port), listen)
	if err != nil {
		return ctx, nil, fmt.Errorf("forward the API to the real node's pods: %w", err)
	}
	url := "http://" + fwd.Addr
	fmt.Fprintf(out, "  job api:     %s (how the real node's pods reach the API: a forward to %s)\n", url, listen)
	return context.WithValue(ctx, devJobAPIKey{}, url), fwd.Close, nil
}

// devJobAPIURL is the URL forwardDevJobAPI made for job pods, or "".
func devJobAPIURL(ctx context.Context) string {
	url, _ := ctx.Value(devJobAPIKey{}).(string)
	return url
}
