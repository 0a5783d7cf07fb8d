"""Classes of CPU time per step from `perf script` output, for docs/mpi.md's
table of where the 2-host DP step's time goes.

Record each process of a job with call stacks, e.g. on 2 simulated hosts:

    cat > /tmp/rec.sh <<'SH'
    #!/bin/sh
    exec perf record -F 1000 --call-graph dwarf,16384 -o /tmp/perf.$OMPI_COMM_WORLD_RANK.data -- "$@"
    SH
    chmod +x /tmp/rec.sh
    shard/mpi/cluster.sh -n 2 -p 1 --rate 10gbit --mpirun -- --bind-to none -x GONOX_DEVICES=1 \\
      -x GOMAXPROCS=1 /tmp/rec.sh ./mpi.test -test.run '^$' -test.bench '^BenchmarkDPStep$/processes=2$' -test.benchtime 30x
    perf script -i /tmp/perf.0.data -F comm,tid,ip,sym > /tmp/p0.txt

then `python3 perfclass.py 32 /tmp/p0.txt ...` (32: the steps the benchmark ran,
its warm-up and first call included) prints, per file, the milliseconds per
step of each class, from the samples at 1000 Hz: start-up (MPI_Init, making
the model), TCP (Open MPI's sends and receives, kernel included), waiting (MPI
polling, sched_yield, sleeps), the matrix products, Adam, the reduce-scatter's
sums and copies, the Go runtime, and the rest.
"""

import collections
import sys


def samples(path):
    out, cur = [], []
    for line in open(path):
        if not line.strip():
            if cur:
                out.append(cur)
            cur = []
        elif not line.startswith(("\t", " ")):
            cur = [line.strip()]
        else:
            parts = line.split(None, 1)
            cur.append(parts[1].strip() if len(parts) > 1 else "?")
    if cur:
        out.append(cur)
    return out


def classify(frames):
    j = " ".join(frames)
    if any(s in j for s in ("MPI_Init", "mca_base_framework", "rng", "tensor.full", "Comm_split", "split_shared")):
        return "setup"
    if "frag_send" in j or "frag_recv" in j:
        return "tcp"
    if any(s in j for s in ("sync_wait", "sched_yield", "opal_progress", "nanosleep", "MPI_Test", "gonox_complete", "gonox_poll", "PMPI")):
        return "wait"
    if "gemm" in j:
        return "products"
    if "adam" in j or "Adam" in j:
        return "adam"
    if any(s in j for s in ("sumFloat32", "copyTensorRegion", "memcpy", "memmove")):
        return "sums/copies"
    if "runtime." in j and "gonox" not in j:
        return "go runtime"
    return "other"


def main():
    steps = float(sys.argv[1])
    for path in sys.argv[2:]:
        got = collections.Counter(classify(s[1:]) for s in samples(path))
        print(path, " ".join(f"{k}={v / steps:.2f}ms" for k, v in sorted(got.items())))


if __name__ == "__main__":
    main()
