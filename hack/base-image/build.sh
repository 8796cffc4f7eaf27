#!/usr/bin/env bash
# Builds the dev and test environment's base image, python 3.11 + vdk-core, into an OCI
# image layout in an ignored cache folder (docs/builder.md, "The dev base image"):
#   layer 1: Debian's python3 and its run-time closure (packages.txt, pinned), each .deb
#            fetched with `apt-get download` and unpacked with `dpkg -x` (nothing is
#            installed on the host, no root needed), without docs, manuals and locales;
#            /etc/passwd with the job user 1000, /tmp, /job;
#   layer 2: vdk-core, the plugins VDK's job template needs (vdk-sqlite, the ingestion
#            plugins of VDK's quickstart) and their dependencies (requirements.txt, pinned)
#            from PyPI, and the vdk-datajobs plugin of this folder (the job's properties
#            and secrets through the datajobs API with the pod's token), installed by
#            Debian's pip of the same python 3.11 into /usr/local.
# Both are byte-compiled (hash-checked .pyc, no times), so pods do not compile python's
# standard library and vdk-core at every start (a run took 7.4 s p50 without, 3.1 s with).
# The layers are written by internal/build (sorted, fixed times and owners), so the same
# lists give the same digest. Skips all work when the stamp (both lists, this script,
# the Go version) matches. `--refresh` rewrites packages.txt's versions from the apt source.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
if [ "${1:-}" = --refresh ]; then
  tmp=$(mktemp)
  grep '^#' "$here/packages.txt" >"$tmp"
  for p in $(grep -v '^#' "$here/packages.txt" | cut -d= -f1); do
    echo "$p=$(apt-cache policy "$p" | awk '/Candidate:/ {print $2}')" >>"$tmp"
  done
  mv "$tmp" "$here/packages.txt"
  exit 0
fi
out=${BASE_IMAGE_DIR:-$here/../../.cache/base-image}
mkdir -p "$out"
out=$(cd "$out" && pwd)
stamp=$(stamp_of "$here/packages.txt" "$here/requirements.txt" "$here/build.sh" "$here/main.go" "$here"/vdk-datajobs/*)
if up_to_date "$out" "$stamp" oci/index.json; then
  exit 0
fi
pip=(/usr/bin/python3 -m pip)
if ! "${pip[@]}" --version >/dev/null 2>&1; then
  echo "base image: Debian's python3 with pip (/usr/bin/python3 -m pip) is needed: apt-get install python3-pip" >&2
  exit 1
fi
echo "building the python 3.11 + vdk-core base image into $out (cold: about a minute, warm: instant)" >&2
tmp=$(mktemp -d "$out/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/debs" "$tmp/python" "$tmp/vdk"
fetch_debs() {
  (cd "$tmp/debs" && apt-get download -qq -o APT::Sandbox::User=root $(grep -v '^#' "$here/packages.txt")) || {
    echo "a pinned package is gone from the apt source: refresh the pins with bash hack/base-image/build.sh --refresh" >&2
    return 1
  }
}
step "debian packages ($(grep -vc '^#' "$here/packages.txt"))" fetch_debs
unpack() {
  local root=$tmp/python deb
  for deb in "$tmp"/debs/*.deb; do dpkg -x "$deb" "$root"; done
  rm -rf "$root"/usr/share/{doc,man,info,locale,lintian}
  mkdir -p "$root/tmp" "$root/job" "$root/etc"
  chmod 1777 "$root/tmp"
  printf 'root:x:0:0:root:/root:/bin/sh\njob:x:1000:1000:data job:/job:/bin/sh\n' >"$root/etc/passwd"
  printf 'root:x:0:\njob:x:1000:\n' >"$root/etc/group"
  ln -sf dash "$root/bin/sh"
  [ -x "$root/usr/bin/python3" ]
}
step "python3 root file system" unpack
install_vdk() {
  "${pip[@]}" wheel -q --disable-pip-version-check --no-deps -w "$tmp/wheels" -r "$here/requirements.txt"
  # vdk-datajobs (in this folder): the job's properties and secrets through the datajobs API.
  cp -r "$here/vdk-datajobs" "$tmp/vdk-datajobs"
  "${pip[@]}" wheel -q --disable-pip-version-check --no-deps -w "$tmp/wheels" "$tmp/vdk-datajobs"
  "${pip[@]}" install -q --disable-pip-version-check --root-user-action=ignore --no-index --no-deps --find-links "$tmp/wheels" \
    --ignore-installed --root "$tmp/vdk" --prefix /usr --no-compile --break-system-packages \
    -r "$here/requirements.txt" vdk-datajobs==0.1.0
  [ -x "$tmp/vdk/usr/local/bin/vdk" ]
  [ -f "$tmp/vdk/usr/local/lib/python3.11/dist-packages/vdk_datajobs.py" ]
}
step "vdk-core (pip)" install_vdk
# Byte-code, so that no pod compiles the standard library and vdk-core at every start: by
# the same python 3.11, hash-checked (no times), with the image's paths.
compile() {
  local dir
  for dir in "$tmp/python/usr/lib/python3.11" "$tmp/vdk/usr/local/lib/python3.11/dist-packages"; do
    /usr/bin/python3 -m compileall -q -j 0 --invalidation-mode unchecked-hash -s "${dir%%/usr/*}" -p / "$dir" >/dev/null
  done
}
step "byte-code" compile
step "oci layout" go run "$here" --out "$tmp/oci" "$tmp/python" "$tmp/vdk"
rm -rf "$out/oci"
mv "$tmp/oci" "$out/oci"
echo "$stamp" >"$out/.stamp"
