#!/usr/bin/env bash
# Smoke runs of examples/mlp for CI: a short single-device run, one epoch
# of each parallel strategy, the comparison table, a checkpoint resume, an
# interruption, and mistakes found before any work (exit status 2, one
# line naming the flag, nothing on stdout; 1 for files).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
source examples/internal/smoke.sh
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

# Ctrl-C names the last checkpoint and exits 130; the run resumes from it.
interrupt "$out/ick" "$out/mlp" -epochs 100000 -quiet -plot "" -ckpt "$out/ick" -hidden 16
last=$(grep -o 'epoch [0-9]*' "$out/int.err" | tail -1 | cut -d' ' -f2)
resumed=$("$out/mlp" -epochs $((last + 1)) -quiet -plot "" -ckpt "$out/ick" -hidden 16)
grep -q "resumed from $out/ick after epoch $last" <<<"$resumed"

usage '^mlp: -epochs -1: want an integer' "$out/mlp" -epochs -1
usage '^mlp: -batch 0: ' "$out/mlp" -batch 0
usage '^mlp: -lr -1: ' "$out/mlp" -lr -1
usage '^mlp: -lr \+Inf: want a finite number' "$out/mlp" -lr Inf
usage '^mlp: -mesh "dp=8": -strategy single trains on one device' "$out/mlp" -mesh dp=8
usage 'strategy fsdp_tp needs a mesh axis "tp"' "$out/mlp" -strategy fsdp_tp -mesh dp=8
usage '^mlp: invalid value "x" for flag -seed' "$out/mlp" -seed x
usage 'GONOX_DEVICES="abc": want a positive integer' env GONOX_DEVICES=abc "$out/mlp" -strategy dp
usage 'GONOX_DEVICES="0"' env GONOX_DEVICES=0 "$out/mlp"
usage '^mlp: GONOX_KERNELS="bogus": unknown kernel set' env GONOX_KERNELS=bogus "$out/mlp"
usage '^mlp: shard: GONOX_DEBUG="yes": want 0 or 1' env GONOX_DEBUG=yes "$out/mlp"
expect 1 "^mlp: -plot $out: is a directory" "$out/mlp" -plot "$out"
expect 1 "^mlp: -ckpt $out/mlp.png/x: not a directory" "$out/mlp" -ckpt "$out/mlp.png/x"
expect 1 '^mlp: data: MNIST: /dev/zero is not a directory' "$out/mlp" -data /dev/zero
