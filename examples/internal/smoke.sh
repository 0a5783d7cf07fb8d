# Helpers the examples' smoke runs (examples/*/smoke.sh) source. They
# expect $out, a scratch directory.

# expect STATUS PATTERN CMD...: CMD exits with STATUS, prints nothing on
# standard output when STATUS is not 0, and one line on standard error
# matching the extended regular expression PATTERN (no goroutine trace).
expect() {
  local want=$1 pattern=$2
  shift 2
  local stdout rc
  set +e
  stdout=$("$@" 2>"$out/stderr")
  rc=$?
  set -e
  local lines
  lines=$(wc -l <"$out/stderr")
  if [ "$rc" != "$want" ] || { [ "$want" != 0 ] && [ -n "$stdout" ]; } || [ "$lines" != 1 ] ||
    ! grep -Eq -- "$pattern" "$out/stderr"; then
    echo "FAIL: $*"
    echo "  exit status $rc (want $want); stdout: ${stdout:0:200}"
    echo "  stderr ($lines lines, want one matching /$pattern/):"
    head -5 "$out/stderr"
    exit 1
  fi
  echo "ok ($rc): $*"
}

# usage PATTERN CMD...: a usage mistake, exit status 2.
usage() { expect 2 "$@"; }

# interrupt DIR CMD...: starts CMD, waits until checkpoint DIR has two
# steps, sends SIGINT, and checks that CMD exits with status 130 saying
# where the last checkpoint is. It prints the step named.
interrupt() {
  local dir=$1
  shift
  "$@" >"$out/int.out" 2>"$out/int.err" &
  local pid=$! i
  for i in $(seq 600); do
    [ "$(find "$dir" -mindepth 1 -maxdepth 1 -name '[0-9]*' 2>/dev/null | wc -l)" -ge 2 ] && break
    sleep 0.1
  done
  kill -INT "$pid"
  local rc
  set +e
  wait "$pid"
  rc=$?
  set -e
  if [ "$rc" != 130 ] || ! grep -Eq "interrupted; the last checkpoint is [a-z]+ [0-9]+ in $dir" "$out/int.err" ||
    grep -q 'goroutine ' "$out/int.err"; then
    echo "FAIL: interrupted $* exited $rc:"
    cat "$out/int.err"
    exit 1
  fi
  echo "ok (130): interrupted $*: $(grep -o 'the last checkpoint is [a-z]* [0-9]*' "$out/int.err")"
}
