# Shared helpers of the hack/*/build.sh scripts (sourced). Every build is stamped: a script
# computes its stamp from its inputs (go.sum, the script, the Go version) and skips all
# work when the output folder's .stamp equals it. Each built component prints one line,
# `  <name>  built in <n>s`; the Go toolchain's `go: downloading` lines are dropped, since
# they hide which binary is being built (errors are printed whole).

# stamp_of FILE... prints the SHA-256 of the files' contents, this library and `go version`.
stamp_of() {
  { cat "$@" "${BASH_SOURCE[0]}"; go version; } | sha256sum | cut -d' ' -f1
}

# up_to_date DIR STAMP [FILE...]: the stamp matches and every FILE exists in DIR.
up_to_date() {
  local dir=$1 want=$2 f
  shift 2
  [ -f "$dir/.stamp" ] && [ "$(cat "$dir/.stamp")" = "$want" ] || return 1
  for f in "$@"; do [ -e "$dir/$f" ] || return 1; done
}

# step NAME COMMAND...: runs COMMAND quietly and prints one line with its time; on failure
# prints the command's output (without download lines) and fails.
step() {
  local name=$1 t=$SECONDS log
  shift
  log=$(mktemp)
  if "$@" >"$log" 2>&1; then
    grep -v '^go: downloading ' "$log" >&2 || true
    printf '  %-26s built in %ss\n' "$name" "$((SECONDS - t))" >&2
    rm -f "$log"
  else
    local rc=$?
    grep -v '^go: downloading ' "$log" >&2 || true
    printf '  %-26s FAILED after %ss\n' "$name" "$((SECONDS - t))" >&2
    rm -f "$log"
    return "$rc"
  fi
}
