#!/usr/bin/env bash
# Smoke runs of examples/mlp for CI: a short single-device run, one epoch
# of each parallel strategy, the comparison table, and a checkpoint resume.
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
resumed=$("$out/mlp" -epochs 2 -quiet -plot "" -ckpt "$out/ckpt")
grep -q "resumed from" <<<"$resumed"
