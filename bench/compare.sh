#!/usr/bin/env bash
# bench/compare.sh: gonox's benchmarks and their anchors (numpy with
# OpenBLAS, PyTorch with 1 and 2 threads, PyTorch DDP over gloo with 2
# processes), interleaved in one run, and the ratio of each figure to its
# anchor against the target of issue 19.
#
# Single-threaded figures are also given per second of CPU time (Go:
# getrusage of the process; the anchors: CPU time of the computing
# thread), which a busy shared machine distorts much less than wall time.
#
# Not part of CI: a full run takes 10-20 minutes. Usage:
#
#	bench/compare.sh [ROUNDS]        # default 3 rounds; medians over rounds
#
# Needs Debian's python3-numpy, libopenblas0-pthread, python3-threadpoolctl
# and python3-torch (apt-get install -y ...); the numpy anchor refuses to
# run unless threadpoolctl reports OpenBLAS. Environment: GONOX_BENCH_LOG
# names the raw log (default: a temporary file, printed at the end).
set -euo pipefail

rounds=${1:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
py=/usr/bin/python3 # Debian's python, which has the Debian numpy and torch
log=${GONOX_BENCH_LOG:-$(mktemp /tmp/gonox-bench.XXXXXX.log)}
bin=$(mktemp -d /tmp/gonox-bench-bin.XXXXXX)
trap 'rm -rf "$bin"' EXIT
cd "$root"

# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE may be set on this machine for the
# benefit of old OpenBLAS builds; they slow a current one, so the anchors
# run without them (the INFO line shows the kernel OpenBLAS then chose).
# An anchor that fails (a DDP worker that dies, say) is reported and
# skipped: its rows then show no ratio.
anchor() {
	if ! env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$py" bench/anchors.py "$@" | tee -a "$log"; then
		echo "WARN anchor '$*' failed" | tee -a "$log" >&2
	fi
}
gobench() { # binary, then go test flags
	local b=$1
	shift
	"$bin/$b" -test.run '^$' "$@" | { grep '^Benchmark' || true; } | tee -a "$log"
}

{
	echo "DATE $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "CPU $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') ($(nproc) cores; $(grep -m1 -o 'avx512f' /proc/cpuinfo || echo 'no avx512'))"
	echo "INFO $(go version); gonox $(git rev-parse --short HEAD 2>/dev/null || echo '?'); rounds=$rounds; load $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee -a "$log"

echo "building benchmark binaries..." >&2
go test -c -o "$bin/gemm" ./tensor/internal/gemm
go test -c -o "$bin/nn" ./nn
go test -c -o "$bin/parallel" ./parallel
go test -c -o "$bin/shard" ./shard
go test -c -o "$bin/optim" ./optim

for r in $(seq "$rounds"); do
	echo "== round $r/$rounds" >&2
	echo "INFO round $r: load average $(cut -d' ' -f1-3 /proc/loadavg) (the machine has $(nproc) cores)" | tee -a "$log"
	# Each gonox figure runs right before its anchor, so both see the same
	# neighbours on a shared machine.
	for t in 1 2; do
		gobench gemm -test.bench "^BenchmarkSgemm$/^1024x1024x1024$/^threads=$t$" -test.benchtime 1s
		anchor sgemm "$t"
	done
	gobench nn -test.bench '^BenchmarkMLPStep$/^sizes=\[32_128_256_128_4\]/batch=16$' -test.cpu 1 -test.benchtime 1s
	anchor mlp 1 32,128,256,128,4 16
	for c in 1 2; do
		gobench nn -test.bench '^BenchmarkMLPStep$/^sizes=\[784_1024_1024_10\]/batch=256$' -test.cpu "$c" -test.benchtime 20x
		anchor mlp "$c" 784,1024,1024,10 256
	done
	gobench parallel -test.bench '^BenchmarkDPStep$/devices=/^step$' -test.benchtime 20x
	gobench optim -test.bench '^BenchmarkShardedUpdate$' -test.benchtime 20x
	anchor ddp
	gobench shard -test.bench '^Benchmark(Copy64MiB|Psum64MiB)$' -test.benchtime 10x
	# The same psum without the collector: each psum's fresh 64 MiB result
	# is garbage at once, and the collector returning that memory to the
	# OS (page faults, system time) is most of a psum's cost.
	GOGC=off "$bin/shard" -test.run '^$' -test.bench '^BenchmarkPsum64MiB$' -test.benchtime 10x |
		{ grep '^Benchmark' || true; } | sed 's/^BenchmarkPsum64MiB/BenchmarkPsum64MiBGOGCoff/' | tee -a "$log"
done

echo
"$py" bench/summarize.py "$log"
echo

# GPT-2 BPE encoding (issue 33): gonox's encoder beside the reference
# JavaScript encoder under node, interleaved round by round (bench/bpe.sh;
# needs node and npm, skipped without them).
if command -v node >/dev/null && command -v npm >/dev/null; then
	bench/bpe.sh "$rounds" | tee -a "$log"
else
	echo "WARN no node/npm: BPE section skipped" | tee -a "$log" >&2
fi
echo
echo "raw log: $log" >&2
