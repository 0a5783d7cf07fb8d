"""PyTorch DDP anchor of shard/mpi/bench.sh: a training step of the MLP
784-1024-1024-10 (ReLU) with softmax cross-entropy and Adam (lr 1e-3) on a
global batch of 256, DistributedDataParallel over gloo, one thread per
process, as BenchmarkDPStep in bench_test.go.

Launched by mpirun (one process per rank, pinned like the gonox runs):

    mpirun -np 2 --bind-to core python3 ddp.py STEPS

Rank and world size come from Open MPI's environment; gloo rendezvous on
127.0.0.1 at $GONOX_DDP_PORT. Every rank runs exactly STEPS timed steps
after 3 warm-up steps (a time-based loop would let the ranks disagree on
the number of collectives under load and hang). Rank 0 prints
"ANCHOR ddp_step_2proc <ms> <unit>" with the mean (ms/step), median
(ms/step-median) and shortest (ms/step-best) step, and its process CPU
time per step (cpu-ms/step).
"""

import os
import statistics
import sys
import time


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    world = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ["MASTER_PORT"] = os.environ.get("GONOX_DDP_PORT", "29517")
    os.environ["OMP_NUM_THREADS"] = "1"
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    try:  # Debian's torch multiplies through OpenBLAS: limit its pool too
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=1)
    except ImportError:
        pass
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    sizes = [784, 1024, 1024, 10]
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i + 2 < len(sizes):
            layers.append(torch.nn.ReLU())
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(*layers))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(256 // world, sizes[0])
    y = torch.randint(0, sizes[-1], (256 // world,))
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    for _ in range(3):
        step()
    dist.barrier()
    ts = []
    c0 = time.process_time()
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        ts.append(time.perf_counter() - t0)
    cpu = (time.process_time() - c0) / steps
    dist.barrier()
    if rank == 0:
        for v, unit in [(sum(ts) / len(ts), "ms/step"), (statistics.median(ts), "ms/step-median"), (min(ts), "ms/step-best"), (cpu, "cpu-ms/step")]:
            print(f"ANCHOR ddp_step_2proc {v * 1e3:.2f} {unit}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
