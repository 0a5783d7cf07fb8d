#!/usr/bin/env bash
# Smoke run of examples/distill for CI: it must print the guide's losses,
# and reject bad flags and environment values with exit status 2, one line
# naming them and no output.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
source examples/internal/smoke.sh
go build -o "$out/distill" ./examples/distill
got=$("$out/distill")
want=$'Loss: 1.09\nLoss: 1.01\nLoss: 0.94\nLoss: 0.88\nLoss: 0.83'
if [ "$got" != "$want" ]; then
  echo "examples/distill printed:"; echo "$got"; echo "want:"; echo "$want"; exit 1
fi
echo "$got"
usage '^distill: -steps -1: want an integer' "$out/distill" -steps -1
usage '^distill: -lr \+Inf: want a finite number' "$out/distill" -lr Inf
usage 'GONOX_DEVICES="abc": want a positive integer' env GONOX_DEVICES=abc "$out/distill"
usage 'GONOX_DEVICES="0"' env GONOX_DEVICES=0 "$out/distill"
usage '^distill: GONOX_DEVICES=1: the teacher and the student need at least 2 devices' env GONOX_DEVICES=1 "$out/distill"
usage '^distill: GONOX_KERNELS="bogus": unknown kernel set' env GONOX_KERNELS=bogus "$out/distill"
