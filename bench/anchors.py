#!/usr/bin/env python3
"""Anchor measurements for bench/compare.sh: the same problems as gonox's
benchmarks, run by numpy (OpenBLAS) and PyTorch on this machine.

Each subcommand prints one line per figure:

    ANCHOR <name> <value> <unit>

and, for the BLAS it runs, an INFO line naming the library and the kernel it
chose (threadpoolctl), so that a figure is never credited to the wrong
library. Timings are medians of several repetitions after a warm-up.

Usage: anchors.py sgemm THREADS | dgemm THREADS [CORETYPE] | mlp THREADS SIZES BATCH | ddp | allreduce
"""

import os
import statistics
import sys
import time


def median_time(fn, reps, warm=2, min_time=0.0, cpu=None):
    """Median wall time of fn. If cpu is a list, the mean CPU time of the
    calling thread per call (time.thread_time) is appended to it: on a
    shared machine, time spent not running does not count. Only meaningful
    with one compute thread, which is then the caller (process time would
    also count the idle pool threads that OpenMP keeps spinning)."""
    for _ in range(warm):
        fn()
    ts = []
    t_start = time.perf_counter()
    c_start = time.thread_time()
    while len(ts) < reps or time.perf_counter() - t_start < min_time:
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    if cpu is not None:
        cpu.append((time.thread_time() - c_start) / len(ts))
    return statistics.median(ts)


def sgemm(threads):
    gemm(threads, "float32", "sgemm")


def dgemm(threads, core=None):
    """float64 matmul (OpenBLAS dgemm), as gemm.BenchmarkDgemm. With core
    (an OpenBLAS core type, such as Zen), OpenBLAS runs that core's kernels
    instead of the best for this CPU: "Zen" is what a Zen 1-3 machine (AVX2,
    no AVX-512) runs, the anchor of gonox's AVX2 kernels."""
    name = "dgemm"
    if core:
        # Read by OpenBLAS when it loads, which is when numpy is imported.
        os.environ["OPENBLAS_CORETYPE"] = core
        name = f"dgemm_{core.lower()}"
    gemm(threads, "float64", name)


def gemm(threads, dtype, name):
    import numpy as np
    from threadpoolctl import threadpool_info, threadpool_limits

    info = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    if not info or info[0].get("internal_api") != "openblas":
        sys.exit(f"numpy does not use OpenBLAS: {info}")
    i = info[0]
    print(f"INFO numpy {np.__version__} {i['internal_api']} {i.get('version')} "
          f"arch={i.get('architecture')} threading={i.get('threading_layer')} {i.get('filepath')}")
    n = 1024
    rng = np.random.default_rng(1)
    a = rng.standard_normal((n, n)).astype(dtype)
    b = rng.standard_normal((n, n)).astype(dtype)
    c = np.empty((n, n), dtype=dtype)
    cpu = []
    with threadpool_limits(limits=threads, user_api="blas"):
        t = median_time(lambda: np.matmul(a, b, out=c), reps=30, min_time=1.0, cpu=cpu)
    print(f"ANCHOR {name}_1024_t{threads} {2 * n**3 / t / 1e9:.2f} GFLOP/s")
    print(f"ANCHOR {name}_1024_t{threads} {2 * n**3 / cpu[0] / 1e9:.2f} GFLOP/cpu-s")


def mlp_model(torch, sizes, final_act):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i + 2 < len(sizes) or final_act:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def mlp(threads, sizes, batch):
    """Forward and backward of an MLP (ReLU, MSE), as nn.BenchmarkMLPStep."""
    import torch
    from threadpoolctl import threadpool_info, threadpool_limits

    torch.set_num_threads(threads)
    # Debian's torch multiplies through OpenBLAS, whose pool
    # torch.set_num_threads does not limit (it stays at the core count):
    # limit every pool, or "1 thread" runs its products on all cores.
    threadpool_limits(limits=threads)
    torch.manual_seed(0)
    sizes = [int(s) for s in sizes.split(",")]
    model = mlp_model(torch, sizes, final_act=False)
    x = torch.randn(batch, sizes[0])
    y = torch.zeros(batch, sizes[-1])

    def step():
        model.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()

    cpu = []
    t = median_time(step, reps=50, warm=5, min_time=1.5, cpu=cpu)
    name = "-".join(map(str, sizes))
    pools = ", ".join(f"{i['internal_api']}={i['num_threads']}" for i in threadpool_info())
    print(f"INFO torch {torch.__version__} threads={torch.get_num_threads()} pools: {pools}")
    print(f"ANCHOR mlp_{name}_b{batch}_t{threads} {t * 1e6:.1f} us/step")
    print(f"ANCHOR mlp_{name}_b{batch}_t{threads} {cpu[0] * 1e6:.1f} cpu-us/step")


def _ddp_worker(rank, world, port, queue):
    import torch
    import torch.distributed as dist

    from threadpoolctl import threadpool_limits

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    threadpool_limits(limits=1)  # OpenBLAS too (see mlp)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    sizes = [784, 1024, 1024, 10]
    model = torch.nn.parallel.DistributedDataParallel(mlp_model(torch, sizes, final_act=True))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(256 // world, sizes[0])
    y = torch.randn(256 // world, sizes[-1])

    def step():
        opt.zero_grad(set_to_none=True)
        loss = ((model(x) - y) ** 2).sum(-1).mean()
        loss.backward()
        opt.step()

    t_step = median_time(step, reps=30, warm=3, min_time=2.0)

    # All-reduce of 64 MiB (gloo), bus bandwidth as NCCL reports it.
    buf = torch.ones(64 << 20 >> 2)
    t_ar = median_time(lambda: dist.all_reduce(buf), reps=10, warm=2)
    if rank == 0:
        queue.put((t_step, t_ar))
    dist.barrier()
    dist.destroy_process_group()


def ddp():
    """DDP (gloo, 2 processes, 1 thread each): step of the MLP
    784-1024-1024-10 on a global batch of 256 with Adam, as
    parallel.BenchmarkDPStep; and a 64 MiB gloo all-reduce."""
    import torch
    import torch.multiprocessing as mp

    import queue
    import socket

    world = 2
    with socket.socket() as sock:  # a free port on the loopback interface
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_ddp_worker, args=(r, world, port, q)) for r in range(world)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + 300
    result = None
    while result is None:
        try:
            result = q.get(timeout=2)
        except queue.Empty:
            failed = [p for p in procs if p.exitcode not in (None, 0)]
            if failed or time.monotonic() > deadline:
                for p in procs:
                    p.terminate()
                sys.exit(f"ddp anchor failed: exit codes {[p.exitcode for p in procs]}")
    t_step, t_ar = result
    for p in procs:
        p.join(timeout=60)
    # A worker stuck in gloo's barrier or teardown would keep this process
    # from exiting (multiprocessing joins its children at exit): end it.
    for p in procs:
        if p.is_alive():
            p.terminate()
            p.join(timeout=5)
        if p.is_alive():
            p.kill()
            p.join()
    nbytes = 64 << 20
    print(f"INFO torch {torch.__version__} DDP gloo world={world}")
    print(f"ANCHOR ddp_step_2proc {t_step * 1e3:.2f} ms/step")
    print(f"ANCHOR gloo_allreduce_64MiB_2proc {nbytes * 2 * (world - 1) / world / t_ar / 1e9:.3f} busGB/s")


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    cmd = argv[1]
    if cmd == "sgemm":
        sgemm(int(argv[2]))
    elif cmd == "dgemm":
        dgemm(int(argv[2]), argv[3] if len(argv) > 3 else None)
    elif cmd == "mlp":
        mlp(int(argv[2]), argv[3], int(argv[4]))
    elif cmd == "ddp":
        ddp()
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
