#!/usr/bin/env bash
# Smoke runs of examples/charrnn for CI: a few steps of a small model with
# and without remat, a checkpoint resumed, an interruption, and mistakes
# found before any work (exit status 2, one line naming the flag, nothing
# on stdout; 1 for files).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
source examples/internal/smoke.sh
go build -o "$out/charrnn" ./examples/charrnn
small=(-embed 16 -hidden 32 -context 32 -batch 8 -eval-batches 1 -sample 40)
"$out/charrnn" "${small[@]}" -steps 10 -eval-every 5 -plot "$out/charrnn.png"
test -s "$out/charrnn.png"
"$out/charrnn" "${small[@]}" -steps 4 -eval-every 4 -plot "" -remat=false
"$out/charrnn" "${small[@]}" -steps 4 -eval-every 2 -plot "" -ckpt "$out/ckpt"
resumed=$("$out/charrnn" "${small[@]}" -steps 6 -eval-every 2 -plot "$out/resumed.png" -ckpt "$out/ckpt")
grep -q "resumed from $out/ckpt after step 4" <<<"$resumed"
grep -q "^step     6" <<<"$resumed"
# The checkpoint knows its model: another one is refused, naming the flag.
usage '^charrnn: -ckpt .* holds step 6 of another run: -hidden: the checkpoint was saved with 32, this run has 64' \
  "$out/charrnn" "${small[@]}" -hidden 64 -steps 8 -plot "" -ckpt "$out/ckpt"

# Ctrl-C names the last checkpoint and exits 130.
interrupt "$out/ick" "$out/charrnn" "${small[@]}" -steps 1000000 -eval-every 1 -plot "" -ckpt "$out/ick"

tiny=("${small[@]}" -steps 1 -plot "")
usage '^charrnn: -hidden 0: ' "$out/charrnn" "${tiny[@]}" -hidden 0
usage '^charrnn: -lr \+Inf: want a finite number' "$out/charrnn" "${tiny[@]}" -lr Inf
usage '^charrnn: -batch 4096 × -context 4096' "$out/charrnn" "${tiny[@]}" -batch 4096 -context 4096
usage '^charrnn: invalid value "x" for flag -seed' "$out/charrnn" "${tiny[@]}" -seed x
usage '^charrnn: GONOX_KERNELS="bogus": unknown kernel set' env GONOX_KERNELS=bogus "$out/charrnn" "${tiny[@]}"
# The default prompt "Light is " needs an 'L': found before training.
tr -d 'L' <<<"$(head -c 20000 examples/charrnn/main.go)" >"$out/noL.txt"
usage "^charrnn: -prompt \"Light is \": the character 'L' is not in noL.txt" "$out/charrnn" "${tiny[@]}" -text "$out/noL.txt"
usage '^charrnn: -context 30000: noL.txt has' "$out/charrnn" "${tiny[@]}" -text "$out/noL.txt" -sample 0 -context 30000
expect 1 '^charrnn: -text /dev/zero: larger than 64 MiB' "$out/charrnn" "${tiny[@]}" -text /dev/zero
expect 1 "^charrnn: -plot $out: is a directory" "$out/charrnn" "${small[@]}" -steps 1 -plot "$out"
expect 1 "^charrnn: -ckpt $out/charrnn.png: not a directory" "$out/charrnn" "${tiny[@]}" -ckpt "$out/charrnn.png"
