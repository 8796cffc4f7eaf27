// Command datajobs is the control service for data jobs on Kubernetes.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	// Mozilla's CA roots, used only when the system has none: the image carries no
	// certificate files (internal/image).
	_ "golang.org/x/crypto/x509roots/fallback"

	"github.com/datajobs/datajobs/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
