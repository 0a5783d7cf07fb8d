#!/usr/bin/env bash
# Smoke runs of examples/moe for CI: a few steps of a small model with each
# strategy, the comparison table, and a checkpoint resumed on another mesh.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
go build -o "$out/moe" ./examples/moe
small=(-dim 32 -layers 2 -heads 2 -experts 8 -hidden 32 -context 32 -batch 16 -eval-batches 1 -sample 40)
"$out/moe" "${small[@]}" -steps 10 -eval-every 5 -plot "$out/moe.png"
test -s "$out/moe.png"
for s in single ep fsdp_ep; do
  "$out/moe" "${small[@]}" -steps 4 -eval-every 4 -plot "" -strategy "$s"
done
"$out/moe" "${small[@]}" -strategy compare
"$out/moe" "${small[@]}" -steps 4 -eval-every 2 -plot "" -ckpt "$out/ckpt"
resumed=$("$out/moe" "${small[@]}" -steps 6 -eval-every 2 -plot "" -ckpt "$out/ckpt" -strategy ep -mesh ep=8)
grep -q "resumed from" <<<"$resumed"
