#!/usr/bin/env bash
# Fails when the modules of hack/modules.sh link different versions of a Kubernetes library
# (k8s.io/* or sigs.k8s.io/*), or when one module links Kubernetes's own libraries (the
# v0.x.y releases cut together: api, apimachinery, client-go, apiextensions-apiserver, ...)
# at more than one version. Each nested module resolves its own graph: a test dependency
# such as the Helm SDK can raise client-go there, and the tests would then exercise
# internal/kube against another client than the one the binary ships. Only the modules that
# provide packages the module's code and tests compile are compared (go list -deps -test),
# not the whole requirement graph, since a graph-only version links nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
linked=$(mktemp)
trap 'rm -f "$linked"' EXIT
# A replaced module is linked at its replacement: its version, or its directory.
format='{{with .Module}}{{.Path}} {{with .Replace}}{{or .Version .Path}}{{else}}{{.Version}}{{end}}{{end}}'
for m in $(bash hack/modules.sh); do
  go -C "$m" list -deps -test -f "$format" ./... |
    grep -E '^(sigs\.)?k8s\.io/' | LC_ALL=C sort -u | sed "s#^#$m #" >>"$linked"
done
fail=0
# One library, two versions in different modules.
while read -r path; do
  echo "check-k8s-versions: $path is linked at different versions:" >&2
  awk -v p="$path" '$2 == p { printf "  %-14s %s\n", $1, $3 }' "$linked" >&2
  fail=1
done < <(awk '{ print $2, $3 }' "$linked" | LC_ALL=C sort -u | awk '{ print $1 }' | uniq -d)
# Kubernetes's own v0 libraries at more than one version within one module.
while read -r m; do
  echo "check-k8s-versions: module $m links Kubernetes libraries of different releases:" >&2
  awk -v m="$m" '$1 == m && $2 ~ /^k8s\.io\// && $3 ~ /^v0\.[0-9]+\.[0-9]+$/ { printf "  %s %s\n", $2, $3 }' "$linked" >&2
  fail=1
done < <(awk '$2 ~ /^k8s\.io\// && $3 ~ /^v0\.[0-9]+\.[0-9]+$/ { print $1, $3 }' "$linked" | LC_ALL=C sort -u | awk '{ print $1 }' | uniq -d)
if [ "$fail" -ne 0 ]; then
  echo "check-k8s-versions: align the versions in the go.mod files of: $(bash hack/modules.sh | tr '\n' ' ')" >&2
  exit 1
fi
echo "check-k8s-versions: $(bash hack/modules.sh | wc -l) modules link the same Kubernetes libraries ($(awk '$2 == "k8s.io/client-go" { print $3; exit }' "$linked"))" >&2
