#!/usr/bin/env bash
# Smoke runs of examples/cnn for CI, on the embedded digits (seconds): a
# short single-device run with its figure, one epoch of each parallel
# strategy, the comparison table, a checkpoint resume on another mesh, an
# interruption, and mistakes found before any work (exit status 2, one
# line naming the flag, nothing on stdout; 1 for files).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
source examples/internal/smoke.sh
go build -o "$out/cnn" ./examples/cnn
small=(-data digits -quiet -channels 8,8)
"$out/cnn" "${small[@]}" -epochs 2 -plot "$out/cnn.png"
test -s "$out/cnn.png"
for s in dp fsdp tp fsdp_tp; do
  "$out/cnn" "${small[@]}" -epochs 1 -plot "" -strategy "$s"
done
"$out/cnn" "${small[@]}" -epochs 1 -plot "" -strategy dp -dtype bf16
"$out/cnn" -data digits -strategy compare -batch 64 -channels 8,16
"$out/cnn" "${small[@]}" -epochs 1 -plot "" -ckpt "$out/ckpt" -strategy dp
resumed=$("$out/cnn" "${small[@]}" -epochs 2 -plot "$out/resumed.png" -ckpt "$out/ckpt" -strategy fsdp_tp)
grep -q "resumed from .* after epoch 1" <<<"$resumed"
grep -q "^epoch   2/2" <<<"$resumed"

# Ctrl-C names the last checkpoint and exits 130; the run resumes from it.
interrupt "$out/ick" "$out/cnn" "${small[@]}" -epochs 100000 -plot "" -ckpt "$out/ick" -channels 4,4
last=$(grep -o 'epoch [0-9]*' "$out/int.err" | tail -1 | cut -d' ' -f2)
resumed=$("$out/cnn" "${small[@]}" -epochs $((last + 1)) -plot "" -ckpt "$out/ick" -channels 4,4)
grep -q "resumed from $out/ick after epoch $last" <<<"$resumed"

usage '^cnn: -epochs -1: want an integer' "$out/cnn" -epochs -1
usage '^cnn: -batch 0: ' "$out/cnn" -batch 0
usage '^cnn: -channels "8": want two sizes' "$out/cnn" -channels 8
usage '^cnn: -decay 2: ' "$out/cnn" -decay 2
usage '^cnn: -lr \+Inf: want a finite number' "$out/cnn" -lr Inf
usage '^cnn: -mesh "dp=8": -strategy single trains on one device' "$out/cnn" -mesh dp=8
usage 'strategy fsdp_tp needs a mesh axis "tp"' "$out/cnn" -data digits -strategy fsdp_tp -mesh dp=8
usage 'splits the first convolution.s 5 channels' "$out/cnn" -data digits -strategy tp -channels 5,8
usage 'GONOX_DEVICES="abc": want a positive integer' env GONOX_DEVICES=abc "$out/cnn" -data digits -strategy dp
usage '^cnn: GONOX_KERNELS="bogus": unknown kernel set' env GONOX_KERNELS=bogus "$out/cnn"
expect 1 "^cnn: -plot $out: is a directory" "$out/cnn" -plot "$out"
expect 1 "^cnn: -ckpt $out/cnn.png/x: not a directory" "$out/cnn" -ckpt "$out/cnn.png/x"
expect 1 '^cnn: data: MNIST: /dev/zero is not a directory' "$out/cnn" -data /dev/zero
