# build_pinned_go_binary (sourced by hack/{registry,hydra,mailpit}/build.sh): builds one
# binary of a Go module pinned by the go.mod/go.sum in the calling script's folder, from the
# Go module proxy, into an ignored cache folder, in one line with its time. The stamp is the
# module's go.sum, this file, hack/lib.sh, the Go version and the call's arguments, so a warm
# run takes well under a second and any change of what is built rebuilds it.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# build_pinned_go_binary MODULE_DIR NAME OUT_DIR PACKAGE TITLE
build_pinned_go_binary() {
  local dir=$1 name=$2 out=$3 pkg=$4 title=$5 stamp tmp
  mkdir -p "$out"
  out=$(cd "$out" && pwd)
  stamp=$({ stamp_of "$dir/go.sum" "${BASH_SOURCE[0]}"; echo "$name $pkg"; } | sha256sum | cut -d' ' -f1)
  if up_to_date "$out" "$stamp" "$name"; then
    return 0
  fi
  echo "building $title into $out (cold: a few minutes, warm: instant)" >&2
  tmp=$(mktemp -d "$out/.build.XXXXXX")
  # The subshell scopes the cd and the cleanup to this build.
  (
    trap 'rm -rf "$tmp"' EXIT
    cd "$dir"
    step "$name" go build -ldflags "-s -w" -o "$tmp/$name" "$pkg"
    mv -f "$tmp/$name" "$out/$name"
    echo "$stamp" >"$out/.stamp"
  )
}
