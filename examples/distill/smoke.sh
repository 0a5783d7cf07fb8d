#!/usr/bin/env bash
# Smoke run of examples/distill for CI: it must print the guide's losses.
set -euo pipefail
cd "$(dirname "$0")/../.."
got=$(go run ./examples/distill)
want=$'Loss: 1.09\nLoss: 1.01\nLoss: 0.94\nLoss: 0.88\nLoss: 0.83'
if [ "$got" != "$want" ]; then
  echo "examples/distill printed:"; echo "$got"; echo "want:"; echo "$want"; exit 1
fi
echo "$got"
