#!/usr/bin/env bash
# Prints the Go modules built from this repository's code, one directory a line: the main
# module (.) first, then every nested module that builds against it (its go.mod replaces
# github.com/datajobs/datajobs with this tree), such as deploy and e2e/console, which hold
# test-only dependencies so the main module's graph is what the binary links. The tool pins
# under hack/ (Kubernetes, Hydra, the registry, the node) replace nothing and are not listed.
# hack/test.sh tests these modules, `make lint` lints them, hack/check-k8s-versions.sh
# compares them.
set -euo pipefail
cd "$(dirname "$0")/.."
echo .
find . -name go.mod -not -path './.cache/*' -not -path './.git/*' -not -path './go.mod' -print0 |
  xargs -0 grep -l '^replace github.com/datajobs/datajobs =>' |
  sed -e 's#^\./##' -e 's#/go.mod$##' | LC_ALL=C sort
