#!/usr/bin/env bash
# Installs or builds everything the service and the tests need on a Debian machine, as
# root or not. Idempotent, and fast when everything is already there.
# `setup.sh dev` (make dev) does only what `datajobs dev` runs: not the tests' OIDC
# provider, browser and compatibility suite's virtualenv, and the real node's runtime only
# as root (the only user dev runs a real node for).
set -euo pipefail
cd "$(dirname "$0")/.."
dev_only=false
case "${1:-}" in
  "") ;;
  dev) dev_only=true ;;
  *) echo "usage: hack/setup.sh [dev]" >&2; exit 2 ;;
esac

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null && sudo="sudo"
fi

need_apt=()
compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null || need_apt+=(postgresql)
command -v python3 >/dev/null || need_apt+=(python3)
if ! $dev_only; then # the compatibility suite's virtualenv and the console's browser test
  python3 -c 'import venv, ensurepip' 2>/dev/null || need_apt+=(python3-venv)
  command -v chromium >/dev/null || need_apt+=(chromium)
fi
/usr/bin/python3 -m pip --version >/dev/null 2>&1 || need_apt+=(python3-pip) # the base image's pip (hack/base-image)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${need_apt[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

if ! command -v go >/dev/null; then
  echo "setup: Go 1.26 is required (https://go.dev/doc/install); it is not on PATH" >&2
  exit 1
fi

bash hack/k8s-bins/build.sh
bash hack/registry/build.sh
bash hack/mailpit/build.sh # Mailpit, the SMTP server of the tests and dev mode (notifications)
$dev_only || bash hack/hydra/build.sh # Ory Hydra, the OIDC provider of the tests (internal/devenv/hydra.go)
if ! $dev_only || [ "$(id -u)" -eq 0 ]; then
  bash hack/node-bins/build.sh # the real node's containerd, runc, CNI and pause (internal/devenv/node.go)
fi
bash hack/base-image/build.sh # python 3.11 + vdk-core, the dev and test base image
mkdir -p .cache/bin
t=$SECONDS
go build -o .cache/bin/datajobs ./cmd/datajobs 2> >(grep -v '^go: downloading ' >&2)
echo "  datajobs                   built in $((SECONDS - t))s" >&2
if $dev_only; then
  exit 0
fi

# The compatibility suite's virtualenv (compat/): the VDK client and pytest, pinned in
# compat/requirements.txt, from PyPI. Rebuilt only when the requirements or the python
# change. vdk-control-cli is an sdist whose setup.py needs pkg_resources: it is built
# with the pinned setuptools, without build isolation.
# It is made at .cache's physical path, which its scripts' #! lines name: made through a
# worktree's .cache symlink, they named the worktree's path and broke when it was removed
# (every vdkcli call of e2e/realnode failed with "no such file or directory"). The path
# is in the stamp, so a venv made elsewhere is made again.
venv="$(cd .cache && pwd -P)/compat-venv"
want="$(sha256sum compat/requirements.txt | cut -d' ' -f1) $(python3 -c 'import sys; print(sys.version.split()[0])') $venv"
if [ "$(cat "$venv/.stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing the compatibility suite's virtualenv into $venv" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "$(grep '^setuptools==' compat/requirements.txt)" "$(grep '^wheel==' compat/requirements.txt)"
  "$venv/bin/pip" install -q --disable-pip-version-check --no-build-isolation -r compat/requirements.txt
  echo "$want" >"$venv/.stamp"
fi
