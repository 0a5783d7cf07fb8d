#!/usr/bin/env bash
# Smoke run of examples/distill for CI: it must print the guide's losses,
# and reject bad flags and device counts with exit status 2 and no output.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
go build -o "$out/distill" ./examples/distill
got=$("$out/distill")
want=$'Loss: 1.09\nLoss: 1.01\nLoss: 0.94\nLoss: 0.88\nLoss: 0.83'
if [ "$got" != "$want" ]; then
  echo "examples/distill printed:"; echo "$got"; echo "want:"; echo "$want"; exit 1
fi
echo "$got"
usage() { # usage error expected: exit 2, nothing on stdout
  set +e; stdout=$("$@" 2>/dev/null); rc=$?; set -e
  if [ "$rc" != 2 ] || [ -n "$stdout" ]; then echo "$* exited $rc, printed: $stdout"; exit 1; fi
}
usage "$out/distill" -steps -1
usage env GONOX_DEVICES=abc "$out/distill"
usage env GONOX_DEVICES=0 "$out/distill"
