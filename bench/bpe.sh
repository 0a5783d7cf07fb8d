#!/usr/bin/env bash
# bench/bpe.sh: gonox's GPT-2 BPE encoder (BenchmarkBPEEncode, data/bpe)
# beside the reference JavaScript encoder (npm gpt-3-encoder 1.1.4 under
# node, bench/bpe_node.js) on the same text, interleaved round by round,
# with the ratio of the medians (issue 33's target: at least 3x).
# bench/compare.sh runs it as its last section; alone:
#
#	bench/bpe.sh [ROUNDS]            # default 3
#
# Needs node and npm; the package is installed into a temporary directory
# unless GPT3_ENCODER_MODULES names a node_modules holding it.
set -euo pipefail

rounds=${1:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
tmp=$(mktemp -d /tmp/gonox-bpe.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
modules=${GPT3_ENCODER_MODULES:-}
if [ -z "$modules" ]; then
	(cd "$tmp" && npm install --silent --no-audit --no-fund gpt-3-encoder@1.1.4 >/dev/null)
	modules=$tmp/node_modules
fi
go test -c -o "$tmp/bpe.test" ./data/bpe
echo "INFO BPE: $(node --version) gpt-3-encoder $(node -p "require('$modules/gpt-3-encoder/package.json').version")"
out=$tmp/bpe.log
for r in $(seq "$rounds"); do
	(cd data/bpe && "$tmp/bpe.test" -test.run '^$' -test.bench '^BenchmarkBPEEncode(Cold)?$' -test.benchtime 2s) | grep '^Benchmark' | tee -a "$out"
	NODE_PATH=$modules node bench/bpe_node.js 3 | tee -a "$out"
done
awk -v rounds="$rounds" '
	function median(a, n,   i, j, t) {
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	{ for (i = 1; i < NF; i++) if ($(i + 1) == "MB/s") { name = $1; sub(/-[0-9]+$/, "", name); v[name, ++n[name]] = $i } }
	END {
		split("BenchmarkBPEEncode BenchmarkNodeBPEEncode BenchmarkBPEEncodeCold BenchmarkNodeBPEEncodeCold", names, " ")
		for (k = 1; k <= 4; k++) { m = names[k]; for (i = 1; i <= n[m]; i++) a[i] = v[m, i]; med[m] = median(a, n[m]) }
		printf "BPE encoding of the Opticks, medians of %d rounds (MB/s):\n", rounds
		printf "  warm cache: gonox %.2f, node %.2f: %.1fx (target >= 3x)\n", med["BenchmarkBPEEncode"], med["BenchmarkNodeBPEEncode"], med["BenchmarkBPEEncode"] / med["BenchmarkNodeBPEEncode"]
		printf "  cold cache: gonox %.2f, node %.2f: %.1fx\n", med["BenchmarkBPEEncodeCold"], med["BenchmarkNodeBPEEncodeCold"], med["BenchmarkBPEEncodeCold"] / med["BenchmarkNodeBPEEncodeCold"]
	}' "$out"
