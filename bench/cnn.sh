#!/usr/bin/env bash
# bench/cnn.sh: issue 29's CNN benchmarks alone, the CNN part of
# bench/compare.sh: in each round nn's BenchmarkConvNetStep (LeNet-5 batch
# 128 and a ResNet basic block batch 32, forward + backward + Adam) at 1
# and then 2 threads, each right before PyTorch 1.13's anchors
# (bench/anchors_cnn.py) at the same thread count; then the medians and
# ratios (anchors_cnn.py summarize). About 15 s a round. Usage:
#
#	bench/cnn.sh [ROUNDS]    # default 3
#
# GONOX_BENCH_LOG names the raw log (default: a temporary file, printed).
set -euo pipefail

rounds=${1:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
py=/usr/bin/python3 # Debian's python, which has the Debian torch
log=${GONOX_BENCH_LOG:-$(mktemp /tmp/gonox-cnn.XXXXXX.log)}
bin=$(mktemp -d /tmp/gonox-cnn-bin.XXXXXX)
trap 'rm -rf "$bin"' EXIT
cd "$root"
go test -c -o "$bin/nn" ./nn
{
	echo "DATE $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "CPU $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') ($(nproc) cores)"
	echo "INFO $(go version); gonox $(git rev-parse --short HEAD 2>/dev/null || echo '?'); rounds=$rounds; load $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee -a "$log"
for r in $(seq "$rounds"); do
	for c in 1 2; do
		"$bin/nn" -test.run '^$' -test.bench '^BenchmarkConvNetStep$' -test.cpu "$c" -test.benchtime 10x |
			{ grep '^Benchmark' || true; } | tee -a "$log"
		for m in lenet resblock; do
			env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$py" bench/anchors_cnn.py convnet "$c" "$m" | tee -a "$log"
		done
	done
	echo "INFO round $r done; load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$log"
done
echo
"$py" bench/anchors_cnn.py summarize "$log"
echo "log: $log"
