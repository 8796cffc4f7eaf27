// Command pause is the sandbox ("pause") container of the real node's pods
// (docs/test-environment.md): registry.k8s.io/pause cannot be pulled here, so the node
// runs this, built static by hack/node-bins/build.sh and pushed as a one-layer image
// by internal/devenv. It holds the pod's namespaces open until SIGINT or SIGTERM and, as
// PID 1 of a shared PID namespace would have to, reaps the children orphaned to it.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
