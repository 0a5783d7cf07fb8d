#!/usr/bin/env bash
# bench/bigdata.sh: examples/moe trains 50 steps on a token file of 20 GB
# (10^10 uint16 tokens; sparse, so it costs no disk) with a peak resident
# memory within 100 MB of the same run on the embedded text (issue 33).
# The file is mapped, never read whole: the run touches only the pages of
# the windows it trains and validates on. Prints both peaks (the maximum
# resident set size of /usr/bin/time -v, or of wait4 through python3
# without it) and fails if they differ by 100 MB or more. It takes about a
# minute on 2 cores (a small model); examples/moe/smoke.sh runs it in CI.
#
#	bench/bigdata.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=$(mktemp -d /tmp/gonox-bigdata.XXXXXX)
trap 'rm -rf "$out"' EXIT
go build -o "$out/moe" ./examples/moe

# peak CMD...: runs CMD (its output to $out/run.log) and prints its peak
# resident memory in kB.
peak() {
	if [ -x /usr/bin/time ]; then
		/usr/bin/time -v -o "$out/time.log" "$@" >"$out/run.log"
		sed -n 's/^\s*Maximum resident set size (kbytes): //p' "$out/time.log"
	else
		python3 -c 'import os, subprocess, sys
p = subprocess.Popen(sys.argv[2:], stdout=open(sys.argv[1], "w"))
_, status, ru = os.wait4(p.pid, 0)
sys.exit(1) if status else print(ru.ru_maxrss)' "$out/run.log" "$@"
	fi
}

run=(-dim 32 -layers 2 -heads 2 -experts 8 -hidden 32 -context 64 -batch 16 -eval-every 25 -eval-batches 2 -sample 40 -steps 50 -plot "")
text_kb=$(peak "$out/moe" "${run[@]}")
vocab=$(sed -n 's/^gonox moe: .* vocabulary \([0-9]*\)$/\1/p' "$out/run.log")
grep "^step" "$out/run.log"

# A token file of the text's vocabulary: the header (tokenfile.go), then
# 10^10 tokens of holes (id 0).
le() { # VALUE BYTES: little-endian bytes as printf escapes
	local v=$1 i s=
	for ((i = 0; i < $2; i++)); do s+=$(printf '\\x%02x' $(((v >> (8 * i)) & 255))); done
	printf '%s' "$s"
}
tokens=10000000000
big="$out/big.tok"
printf "GONOXTOK$(le 1 4)$(le 2 4)$(le "$vocab" 8)$(le $tokens 8)" >"$big"
truncate -s $((32 + 2 * tokens)) "$big"
echo "token file: $(du -h --apparent-size "$big" | cut -f1) apparent, $(du -h "$big" | cut -f1) on disk"

data_kb=$(peak "$out/moe" "${run[@]}" -data "$big")
grep -q "windows of 65 tokens, vocabulary $vocab" "$out/run.log"
grep "^step" "$out/run.log"
diff_mb=$(((data_kb - text_kb) / 1024))
echo "peak resident memory: $((text_kb / 1024)) MB on the embedded text, $((data_kb / 1024)) MB on the 20 GB token file ($diff_mb MB more)"
if [ "$diff_mb" -ge 100 ]; then
	echo "FAIL: 100 MB or more above the run on the text" >&2
	exit 1
fi
