// Command datajobs is the control service for data jobs on Kubernetes.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/datajobs/datajobs/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
