#!/usr/bin/env bash
# bench/data.sh: how much faster the data loader delivers batches than
# examples/moe consumes them (issue 33's target: at least 10x).
# BenchmarkTokenWindows (package data) reads shuffled batches of 32
# windows of 64 tokens, moe's default batch, from a token file of 16 MiB
# and from a sparse one of 20 GB; BenchmarkTrainStep/dp_ep (examples/moe)
# trains on such a batch. Both run in this one script, one after the
# other, so they see the same machine; the ratio is of their medians.
#
#	bench/data.sh [ROUNDS]          # default 3
set -euo pipefail

rounds=${1:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
tmp=$(mktemp -d /tmp/gonox-data-bench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
go test -c -o "$tmp/data.test" ./data
go test -c -o "$tmp/moe.test" ./examples/moe
echo "CPU $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') ($(nproc) cores; $(grep -m1 -o 'avx512f' /proc/cpuinfo || echo 'no avx512')); load $(cut -d' ' -f1-3 /proc/loadavg)"
log=$tmp/log
for r in $(seq "$rounds"); do
	"$tmp/data.test" -test.run '^$' -test.bench '^BenchmarkTokenWindows$' -test.benchtime 500x | grep '^Benchmark' | tee -a "$log"
	(cd examples/moe && "$tmp/moe.test" -test.run '^$' -test.bench '^BenchmarkTrainStep$/^dp_ep$' -test.benchtime 3x) | grep '^Benchmark' | tee -a "$log"
done
awk '
	function median(a, n,   i, j, t) {
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	{ name = $1; sub(/-[0-9]+$/, "", name); for (i = 1; i < NF; i++) if ($(i + 1) == "µs/batch" || $(i + 1) == "µs/step") v[name, ++n[name]] = $i }
	END {
		for (k in n) { for (i = 1; i <= n[k]; i++) a[i] = v[k, i]; med[k] = median(a, n[k]) }
		step = med["BenchmarkTrainStep/dp_ep"]
		printf "moe training step (dp_ep, batch 32x64): %.0f µs\n", step
		split("file=16MiB file=20GB-sparse", files, " ")
		for (f = 1; f <= 2; f++) {
			m = med["BenchmarkTokenWindows/" files[f]]
			printf "loader, %s: %.0f µs a batch: %.0fx the step (target >= 10x)\n", files[f], m, step / m
		}
	}' "$log"
