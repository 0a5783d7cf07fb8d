#!/usr/bin/env bash
# Benchmarks of multi-process meshes (issue 18), side by side in one run:
#  1. all-reduce of 4 MiB and 64 MiB float32 over 2 processes: gonox
#     (shard.Map + Psum, each result donated to the next; through shared
#     memory, and through MPI's collectives with GONOX_MPI_SHM=0) and the
#     binding alone (buffers reused) vs a plain C MPI_Allreduce loop
#     (testdata/allreduce.c, built here with mpicc). Target: gonox >= 0.9x
#     the C loop's bandwidth.
#  2. a DP training step (parallel.Trainer, strategy DP, Adam) of the MLP
#     784-1024-1024-10 on a global batch of 256: 2 processes x 1 core vs
#     1 process x 1 core (target >= 1.7x), and vs PyTorch DDP over gloo,
#     2 processes x 1 thread (testdata/ddp.py, the same step, launched by
#     mpirun like the gonox runs; target: faster); the 2-process step
#     also with the collectives through MPI's (GONOX_MPI_SHM=0). For
#     scale, two 1-process runs side by side (one per core: the speed of a
#     core while the other computes too) and the speed-up of a step that
#     took half of that plus one all-reduce of the parameters at gonox's
#     4 MiB speed.
#
# Every process gets one core: mpirun --bind-to core with GOMAXPROCS=1 and
# one device per process; the 1-process run is pinned with taskset -c 0;
# the DDP anchor runs one torch thread per process under the same mpirun.
# Each round runs every figure once, in an order that alternates between
# rounds; every timed loop starts with a warm-up call and times each call
# (C loop and gonox: 200 calls of 4 MiB, 20 of 64 MiB; DP steps: 20). The
# summary gives, per figure, the median over rounds of each round's median
# call and the best call of all rounds; per ratio, the median (and range)
# of the ratios paired within a round and the ratio of the best calls,
# against the targets. On a busy machine the best calls are the better
# estimate of what the code can do; the medians show what the load left.
#
# Usage: shard/mpi/bench.sh [ROUNDS]   (default 7). A round took about
# 20 s on 2 idle cores (7 rounds: 2 m 22 s) and 85 s at load average
# 10-20. Needs openmpi-bin, libopenmpi-dev and,
# for the DDP anchor, python3-torch and python3-threadpoolctl (Debian's
# /usr/bin/python3). The machine should be otherwise idle: with 2
# processes on 2 cores, any other load shows in every figure (the load
# average is logged per round). GONOX_BENCH_LOG names the raw log
# (default: a temporary file, printed at the end).
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-7}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
export OMPI_MCA_btl=self,vader,tcp
py=/usr/bin/python3
out=$(mktemp -d)
log=${GONOX_BENCH_LOG:-$(mktemp /tmp/gonox-mpibench.XXXXXX.log)}
trap 'rm -rf "$out"' EXIT

{
	echo "DATE $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "CPU $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') ($(nproc) cores)"
	echo "INFO $(mpirun --version | head -1); $(go version); gonox $(git rev-parse --short HEAD 2>/dev/null || echo '?'); rounds=$rounds"
} | tee "$log"
echo "building..." >&2
mpicc -O2 -o "$out/allreduce" shard/mpi/testdata/allreduce.c
go test -tags mpi -c -o "$out/mpi.test" ./shard/mpi

# mpirun with one core and one device per process; prints rank 0's
# standard output (from mpirun's per-rank files: tagged output may split a
# go test result line).
run2() {
	rm -rf "$out/io"
	mpirun -np 2 --bind-to core --map-by core --output-filename "$out/io" -x GONOX_DEVICES=1 -x GOMAXPROCS=1 "$@" >/dev/null 2>&1 || true
	cat "$out"/io/*/rank.0/stdout
}
gobench() { # filter, iterations, then the launcher
	local filter=$1 n=$2
	shift 2
	"$@" "$out/mpi.test" -test.run '^$' -test.bench "$filter" -test.benchtime "${n}x" 2>&1 | { grep '^Benchmark' || true; }
}
c_allreduce() { run2 "$out/allreduce" "$1" "$2"; }
go_allreduce() { gobench "^BenchmarkAllreduce\$/^MiB=$1\$/" "$2" run2; }
dp1() { GONOX_DEVICES=1 GOMAXPROCS=1 gobench '^BenchmarkDPStep$' 20 taskset -c 0; }
dp2() { gobench '^BenchmarkDPStep$' 20 run2; }
# Two 1-process runs at once, one per core: what a core computes while the
# other core is busy too (they share the L3 and the memory bus), the step a
# process of the 2-process run would take on the whole batch with no
# communication. Prints core 0's result as processes=1x2.
dpside() {
	GONOX_DEVICES=1 GOMAXPROCS=1 taskset -c 1 "$out/mpi.test" -test.run '^$' -test.bench '^BenchmarkDPStep$' -test.benchtime 20x >/dev/null 2>&1 &
	local other=$!
	gobench '^BenchmarkDPStep$' 20 env GONOX_DEVICES=1 GOMAXPROCS=1 taskset -c 0 | sed 's/processes=1/processes=1x2/'
	wait "$other" || true
}
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE may be set on this machine for old
# OpenBLAS builds; they slow a current one (see bench/compare.sh).
ddp() {
	local port=$((20000 + RANDOM % 20000))
	run2 -x GONOX_DDP_PORT=$port env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$py" shard/mpi/testdata/ddp.py 20 | grep '^ANCHOR ddp_step' ||
		echo "WARN the DDP anchor failed"
}

for r in $(seq "$rounds"); do
	echo "== round $r/$rounds" >&2
	echo "ROUND $r load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$log"
	if ((r % 2)); then
		order="c4 g4 c64 g64 dp1 dpside dp2 ddp"
	else
		order="ddp dp2 dpside dp1 g64 c64 g4 c4"
	fi
	for job in $order; do
		case $job in
		c4) c_allreduce 4 200 || echo "WARN $job failed" ;;
		g4) go_allreduce 4 200 || echo "WARN $job failed" ;;
		c64) c_allreduce 64 20 || echo "WARN $job failed" ;;
		g64) go_allreduce 64 20 || echo "WARN $job failed" ;;
		dp1) dp1 || echo "WARN $job failed" ;;
		dp2) dp2 || echo "WARN $job failed" ;;
		dpside) dpside || echo "WARN $job failed" ;;
		ddp) ddp ;;
		esac
	done | tee -a "$log"
done

echo
"$py" - "$log" <<'PY'
import re, statistics, sys
rounds, cur = [], None
PAIRS = re.compile(r"([\d.]+) ((?:cpu-)?(?:GB/s|ms/step)(?:-median|-best)?)\b")
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith(("DATE", "CPU", "INFO")):
        print(line)
    if line.startswith("ROUND"):
        cur = {"load": float(line.split()[3])}
        rounds.append(cur)
        continue
    if cur is None:
        continue
    key = None
    if m := re.match(r"C MPI_Allreduce (\d+) MiB:", line):
        key = f"c{m[1]}"
    elif m := re.match(r"BenchmarkAllreduce/MiB=(\d+)/(\w+)", line):
        key = f"{m[2]}{m[1]}"
    elif line.startswith("BenchmarkDPStep/processes=1x2"):
        key = "dpside"
    elif line.startswith("BenchmarkDPStep/processes=2-mpicoll"):
        key = "dp2mpi"
    elif m := re.match(r"BenchmarkDPStep/processes=(\d)", line):
        key = f"dp{m[1]}"
    elif line.startswith("ANCHOR ddp_step_2proc"):
        key = "ddp"
    if key:
        for v, unit in PAIRS.findall(line):
            cur[(key, unit)] = float(v)

def col(k, u):
    return [r[(k, u)] for r in rounds if (k, u) in r]

print(f"load average (1 min) at the start of each round: {' '.join(str(r['load']) for r in rounds)}")
print()
print("figures: median over rounds of each round's median call (range over rounds); best: the shortest call of all rounds")
for k, name, u in [("c4", "C MPI_Allreduce 4 MiB", "GB/s"), ("gonox4", "gonox Psum 4 MiB", "GB/s"),
                   ("mpicoll4", "gonox Psum through MPI 4 MiB", "GB/s"), ("binding4", "binding 4 MiB", "GB/s"),
                   ("c64", "C MPI_Allreduce 64 MiB", "GB/s"), ("gonox64", "gonox Psum 64 MiB", "GB/s"),
                   ("mpicoll64", "gonox Psum through MPI 64 MiB", "GB/s"), ("binding64", "binding 64 MiB", "GB/s"),
                   ("dp1", "DP step, 1 process x 1 core", "ms/step"), ("dpside", "same, 2 such runs at once (core 0)", "ms/step"),
                   ("dp2", "DP step, 2 processes x 1 core", "ms/step"),
                   ("dp2mpi", "same, collectives through MPI", "ms/step"),
                   ("ddp", "PyTorch DDP (gloo) 2 x 1 thread", "ms/step")]:
    v = col(k, u + "-median")
    if not v:
        print(f"  {name:34s} n/a")
        continue
    best = (max if u == "GB/s" else min)(col(k, u + "-best"))
    cpu = col(k, "cpu-ms/step")
    extra = f"; CPU {statistics.median(cpu):.4g} cpu-ms/step (rank 0)" if cpu else ""
    print(f"  {name:34s} {statistics.median(v):.4g} {u} ({min(v):.4g}-{max(v):.4g}, {len(v)} rounds); best {best:.4g}{extra}")
print()
print("ratios against the targets: median (range) of the ratios of median calls paired within a round | ratio of the best calls")
for num, den, u, name, target in [("gonox4", "c4", "GB/s", "gonox / C all-reduce, 4 MiB", 0.9), ("gonox64", "c64", "GB/s", "gonox / C all-reduce, 64 MiB", 0.9),
                                  ("mpicoll4", "c4", "GB/s", "gonox through MPI / C, 4 MiB", None), ("mpicoll64", "c64", "GB/s", "gonox through MPI / C, 64 MiB", None),
                                  ("binding4", "c4", "GB/s", "binding / C all-reduce, 4 MiB", None), ("binding64", "c64", "GB/s", "binding / C all-reduce, 64 MiB", None),
                                  ("dp1", "dp2", "ms/step", "DP speed-up, 2 processes vs 1", 1.7), ("dp1", "dp2mpi", "ms/step", "same, collectives through MPI", None),
                                  ("ddp", "dp2", "ms/step", "DP step, DDP time / gonox time", 1.0)]:
    rs = [r[(num, u + "-median")] / r[(den, u + "-median")] for r in rounds if (num, u + "-median") in r and (den, u + "-median") in r]
    if not rs:
        print(f"  {name:34s} n/a")
        continue
    pick = max if u == "GB/s" else min
    best = pick(col(num, u + "-best")) / pick(col(den, u + "-best"))
    med = statistics.median(rs)
    if target is None:
        verdict = ""
    elif target == 1.0:
        verdict = "target > 1 (gonox faster): " + ("met" if med > 1 else "NOT met")
    else:
        verdict = f"target >= {target}: " + ("met" if med >= target else "NOT met")
    print(f"  {name:34s} {med:.3f}x ({min(rs):.3f}-{max(rs):.3f}) | best {best:.3f}x  {verdict}")

# What 2 processes could reach on this machine: each computes half the
# batch at the speed a core has while the other core computes too (the
# side-by-side run), then exchanges the gradients and parameters (DP's
# reduce-scatter and all-gather move the bytes of one all-reduce of the
# 7.45 MB of parameters) at gonox's 4 MiB all-reduce speed, with no
# overlap and nothing else: dp1 / (dpside/2 + 7.45 MB / gonox4).
PARAM_BYTES = 4 * (784 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * 10 + 10)
bounds = [r[("dp1", "ms/step-median")] / (r[("dpside", "ms/step-median")] / 2 + PARAM_BYTES / (r[("gonox4", "GB/s-median")] * 1e9) * 1e3)
          for r in rounds if all(k in r for k in [("dp1", "ms/step-median"), ("dpside", "ms/step-median"), ("gonox4", "GB/s-median")])]
if bounds:
    print(f"  {'DP speed-up within reach':34s} {statistics.median(bounds):.3f}x ({min(bounds):.3f}-{max(bounds):.3f})  for scale: half the side-by-side step plus one all-reduce at gonox's 4 MiB speed")
PY
echo
echo "raw log: $log" >&2
