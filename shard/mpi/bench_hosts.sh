#!/usr/bin/env bash
# The DP step of the MLP 784-1024-1024-10 (batch 256, Adam) on 2 simulated
# hosts x 1 process (cluster.sh: network namespaces, TCP between them)
# against one process and against PyTorch DDP over gloo on the same
# namespaces (issue 34's targets: >= 1.7x one process, exposed
# communication <= 10 % of the step, >= 1.5x DDP), in interleaved rounds:
#  dp1     BenchmarkDPStep, 1 process, GONOX_DEVICES=1 GOMAXPROCS=1, taskset -c 0
#  hosts   the same on 2 hosts x 1 process, links shaped to 10 Gbit/s
#          (cluster.sh --rate 10gbit; this kernel may have no netem, so no delay)
#  open    the same with the links unshaped (veth at the kernel's speed)
#          (hosts and open also run with the gradients reduce-scattered in
#          bfloat16, Config.ReduceDType: opt-in, not the float32 numbers)
#  spin    hosts (float32) with GONOX_MPI_SPIN=10s: waiting for MPI without
#          pause, as Open MPI does, instead of sleeping after 1 ms
#  ddp     testdata/ddp.py on 2 hosts x 1 process, 10 Gbit/s, one thread each
# Each process may use either core (--bind-to none: the simulated hosts
# share the machine's two cores, and TCP's work in the kernel runs on them
# too, so cpu-ms/step, the process's CPU time per step, shows its cost).
#
# Usage: shard/mpi/bench_hosts.sh [ROUNDS]   (default 5; a round takes
# about 40 s on 2 idle cores). Needs root (network namespaces), Open MPI,
# and for the DDP anchor /usr/bin/python3 with torch. The machine should be
# otherwise idle: processes that wait for each other at every collective
# suffer from any other load far more than one process does. The summary
# gives per figure the median over rounds of each round's median step
# (range), the best step, the CPU and exposed times of both processes,
# and the ratios paired within rounds. GONOX_BENCH_LOG names the raw log.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-5}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Open MPI's TCP progress thread, which cluster.sh leaves off (see there):
# with gonox's waits sleeping between tests it shortens the 2-host step.
export OMPI_MCA_btl_tcp_progress_thread=${OMPI_MCA_btl_tcp_progress_thread:-1}
out=$(mktemp -d)
log=${GONOX_BENCH_LOG:-$(mktemp /tmp/gonox-hostsbench.XXXXXX.log)}
trap 'rm -rf "$out"' EXIT
{
	echo "DATE $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "CPU $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') ($(nproc) cores)"
	echo "INFO $(mpirun --version | head -1); $(go version); gonox $(git rev-parse --short HEAD 2>/dev/null || echo '?'); rounds=$rounds"
} | tee "$log"
go test -tags mpi -c -o "$out/mpi.test" ./shard/mpi
bench=(-test.run '^$' -test.bench '^BenchmarkDPStep$/processes=[12](-bf16)?$' -test.benchtime 30x)
dp1() { GONOX_DEVICES=1 GOMAXPROCS=1 taskset -c 0 "$out/mpi.test" "${bench[@]}" | grep '^Benchmark' | sed 's/^/dp1 /'; }
hosts() { # label, GONOX_MPI_SPIN, then cluster.sh's link options
	local label=$1 spin=$2
	shift 2
	local b=("${bench[@]}")
	[ "$spin" = 1ms ] || b=(-test.run '^$' -test.bench '^BenchmarkDPStep$/processes=2$' -test.benchtime 30x)
	shard/mpi/cluster.sh -n 2 -p 1 "$@" --mpirun -- --bind-to none -x GONOX_DEVICES=1 -x GOMAXPROCS=1 -x GONOX_MPI_SPIN="$spin" \
		"$out/mpi.test" "${b[@]}" 2>/dev/null | grep '^Benchmark' | sed "s/^/$label /"
}
ddp() {
	shard/mpi/cluster.sh -n 2 -p 1 --rate 10gbit -- sh -c '$GONOX_CLUSTER_MPIRUN --bind-to none \
		-x MASTER_ADDR=$(echo $GONOX_CLUSTER_HOSTS | cut -d" " -f1) -x GLOO_SOCKET_IFNAME=eth0 -x GONOX_DDP_PORT=29517 \
		env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 shard/mpi/testdata/ddp.py 30' 2>/dev/null |
		grep '^ANCHOR' | sed 's/^/ddp /' || echo "WARN the DDP anchor failed"
}
for r in $(seq "$rounds"); do
	echo "== round $r/$rounds" >&2
	echo "ROUND $r load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$log"
	order="dp1 hosts spin open ddp"
	((r % 2)) || order="ddp open spin hosts dp1"
	for job in $order; do
		case $job in
		dp1) dp1 ;;
		hosts) hosts hosts 1ms --rate 10gbit ;;
		spin) hosts spin 10s --rate 10gbit ;;
		open) hosts open 1ms ;;
		ddp) ddp ;;
		esac
	done | tee -a "$log"
done
echo
/usr/bin/python3 - "$log" <<'PY'
import re, statistics, sys
rounds, cur = [], None
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith(("DATE", "CPU", "INFO")):
        print(line)
    elif line.startswith("ROUND"):
        cur = {"load": line.split()[3]}
        rounds.append(cur)
    elif cur is not None and line[:4] in ("dp1 ", "host", "spin", "open", "ddp "):
        key = line.split()[0] + ("-bf16" if "-bf16 " in line else "")
        for v, unit in re.findall(r"([\d.]+) ((?:cpu-|exposed-)?ms/step(?:-median|-best)?)", line):
            cur.setdefault((key, unit), []).append(float(v))  # one per process
print("load average (1 min) at each round's start:", " ".join(r["load"] for r in rounds))
names = {"dp1": "1 process", "hosts": "2 hosts x 1, 10 Gbit/s", "hosts-bf16": "same, gradients reduced in bf16",
         "spin": "same (float32), waiting without pause",
         "open": "2 hosts x 1, unshaped", "open-bf16": "same, gradients reduced in bf16", "ddp": "PyTorch DDP, 2 hosts x 1, 10 Gbit/s"}
def med(k, u):
    return [statistics.median(r[(k, u)]) for r in rounds if (k, u) in r]
for k, name in names.items():
    v = med(k, "ms/step-median")
    if not v:
        print(f"  {name:36s} n/a"); continue
    best = min(min(r[(k, "ms/step-best")]) for r in rounds if (k, "ms/step-best") in r)
    cpu = [x for r in rounds for x in r.get((k, "cpu-ms/step"), [])]
    exp = [x for r in rounds for x in r.get((k, "exposed-ms/step"), [])]
    extra = f"; CPU {min(cpu):.1f}-{max(cpu):.1f} ms/step per process" if cpu else ""
    if exp and k != "dp1":
        extra += f"; exposed {min(exp):.1f}-{max(exp):.1f} ms"
    print(f"  {name:36s} {statistics.median(v):.2f} ms ({min(v):.2f}-{max(v):.2f}); best {best:.2f}{extra}")
print("ratios paired within rounds: median (range)")
for num, den, name, target in [("dp1", "hosts", "speed-up, 10 Gbit/s, vs 1 process", 1.7), ("dp1", "hosts-bf16", "same, bf16 reduction (opt-in)", None),
                               ("dp1", "spin", "same, waiting without pause", None), ("spin", "hosts", "sleeping waits' gain over spinning", None),
                               ("dp1", "open", "speed-up, unshaped, vs 1 process", None), ("dp1", "open-bf16", "same, bf16 reduction (opt-in)", None),
                               ("ddp", "hosts", "DDP time / gonox time, 10 Gbit/s", 1.5), ("ddp", "hosts-bf16", "same, gonox's bf16 reduction (opt-in)", None)]:
    rs = [statistics.median(r[(num, "ms/step-median")]) / statistics.median(r[(den, "ms/step-median")])
          for r in rounds if (num, "ms/step-median") in r and (den, "ms/step-median") in r]
    if rs:
        verdict = "" if target is None else f"  target >= {target}: " + ("met" if statistics.median(rs) >= target else "NOT met")
        print(f"  {name:36s} {statistics.median(rs):.3f}x ({min(rs):.3f}-{max(rs):.3f}){verdict}")
for k, name in [("hosts", "exposed share of the step, 10 Gbit/s"), ("hosts-bf16", "same, bf16 reduction (opt-in)")]:
    fr = [statistics.median(r[(k, "exposed-ms/step")]) / statistics.median(r[(k, "ms/step-median")]) for r in rounds if (k, "exposed-ms/step") in r]
    if fr:
        verdict = "  target <= 10 %: " + ("met" if statistics.median(fr) <= 0.10 else "NOT met") if k == "hosts" else ""
        print(f"  {name:36s} {100*statistics.median(fr):.0f} % ({100*min(fr):.0f}-{100*max(fr):.0f} %){verdict}")
PY
echo "raw log: $log" >&2
