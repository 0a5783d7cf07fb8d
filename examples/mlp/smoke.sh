#!/usr/bin/env bash
# Smoke runs of examples/mlp for CI: a short single-device run, one epoch
# of each parallel strategy, the comparison table, a checkpoint resume, and
# usage errors (exit status 2, nothing on stdout).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
go build -o "$out/mlp" ./examples/mlp
"$out/mlp" -epochs 3 -quiet -plot "$out/mlp.png"
test -s "$out/mlp.png"
for s in dp fsdp tp fsdp_tp; do
  "$out/mlp" -epochs 1 -quiet -plot "" -strategy "$s"
done
"$out/mlp" -strategy compare -batch 64
"$out/mlp" -epochs 1 -quiet -plot "" -ckpt "$out/ckpt"
resumed=$("$out/mlp" -epochs 2 -quiet -plot "$out/resumed.png" -ckpt "$out/ckpt")
grep -q "resumed from .* after epoch 1" <<<"$resumed"
grep -q "^epoch   2/2" <<<"$resumed"
usage() { # usage error expected: exit 2, nothing on stdout
  set +e; stdout=$("$@" 2>/dev/null); rc=$?; set -e
  if [ "$rc" != 2 ] || [ -n "$stdout" ]; then echo "$* exited $rc, printed: $stdout"; exit 1; fi
}
usage "$out/mlp" -epochs -1
usage "$out/mlp" -batch 0
usage "$out/mlp" -lr -1
usage "$out/mlp" -mesh dp=8
usage "$out/mlp" -strategy fsdp_tp -mesh dp=8
usage env GONOX_DEVICES=abc "$out/mlp" -strategy dp
usage env GONOX_DEVICES=0 "$out/mlp"
