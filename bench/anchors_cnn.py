#!/usr/bin/env python3
"""PyTorch anchors of nn.BenchmarkConvNetStep (issue 29) for bench/compare.sh:
a training step (forward, backward, Adam update) of the same two models on the
same batches, float32, with 1 or 2 threads.

  lenet     LeNet-5 on 28x28, batch 128: conv 1->6 5x5 padding 2, ReLU, max-pool 2,
            conv 6->16 5x5, ReLU, max-pool 2, linear 400->120->84->10 with ReLU
            between, softmax cross-entropy.
  resblock  a ResNet basic block on [32, 64, 32, 32]: conv 3x3 64->64 padding 1
            without bias, BatchNorm, ReLU, conv 3x3, BatchNorm, add the input, ReLU,
            global average pool, linear 64->10, cross-entropy.

PyTorch 1.13 (Debian's python3-torch) runs the convolutions through oneDNN
(mkldnn), a strong anchor. Prints, as bench/anchors.py does,

    ANCHOR convnet_<model>_b<batch>_t<threads> <value> us/step
    ANCHOR convnet_<model>_b<batch>_t<threads> <value> cpu-us/step   (1 thread)

The summarize subcommand reads a bench/compare.sh log and prints, for each
model and thread count, the median gonox step time, the median anchor, their
ratio and whether the target (gonox <= 0.8x PyTorch) is met.

Usage: anchors_cnn.py convnet THREADS lenet|resblock | summarize LOG
"""

import os
import re
import statistics
import sys
import time
from collections import defaultdict

BATCH = {"lenet": 128, "resblock": 32}
TARGET = 0.8


def median_time(fn, reps, warm=2, min_time=0.0):
    """Median wall time of fn, and the mean CPU time of the calling
    thread per call (meaningful with one compute thread)."""
    for _ in range(warm):
        fn()
    ts = []
    t_start = time.perf_counter()
    c_start = time.thread_time()
    while len(ts) < reps or time.perf_counter() - t_start < min_time:
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), (time.thread_time() - c_start) / len(ts)


def models(torch):
    nn = torch.nn

    class LeNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(1, 6, 5, padding=2)
            self.c2 = nn.Conv2d(6, 16, 5)
            self.f1, self.f2, self.f3 = nn.Linear(400, 120), nn.Linear(120, 84), nn.Linear(84, 10)

        def forward(self, x):
            f = torch.nn.functional
            h = f.max_pool2d(f.relu(self.c1(x)), 2)
            h = f.max_pool2d(f.relu(self.c2(h)), 2)
            h = h.flatten(1)
            return self.f3(f.relu(self.f2(f.relu(self.f1(h)))))

    class ResBlock(nn.Module):
        def __init__(self, c=64):
            super().__init__()
            self.c1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.c2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.b1, self.b2 = nn.BatchNorm2d(c), nn.BatchNorm2d(c)
            self.head = nn.Linear(c, 10)

        def forward(self, x):
            f = torch.nn.functional
            h = f.relu(self.b1(self.c1(x)))
            h = f.relu(self.b2(self.c2(h)) + x)
            return self.head(f.adaptive_avg_pool2d(h, 1).flatten(1))

    return {"lenet": (LeNet, [128, 1, 28, 28]), "resblock": (ResBlock, [32, 64, 32, 32])}


def convnet(threads, name):
    # Debian's torch multiplies through OpenBLAS, whose pool
    # torch.set_num_threads does not limit: limit every pool (through the
    # environment, read when the libraries load, and threadpoolctl if it
    # is installed).
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)
    import torch

    torch.set_num_threads(threads)
    try:
        from threadpoolctl import threadpool_info, threadpool_limits

        threadpool_limits(limits=threads)
        pools = ", ".join(f"{i['internal_api']}={i['num_threads']}" for i in threadpool_info())
    except ImportError:
        pools = f"(no threadpoolctl; OMP/OPENBLAS_NUM_THREADS={threads})"
    torch.manual_seed(0)
    cls, shape = models(torch)[name]
    model = cls()
    x = torch.randn(*shape)
    y = torch.arange(shape[0]) % 10
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    t, cpu = median_time(step, reps=20, warm=3, min_time=2.0)
    print(f"INFO torch {torch.__version__} threads={torch.get_num_threads()} "
          f"mkldnn={torch.backends.mkldnn.is_available()} pools: {pools}")
    key = f"convnet_{name}_b{shape[0]}_t{threads}"
    print(f"ANCHOR {key} {t * 1e6:.1f} us/step")
    if threads == 1:
        print(f"ANCHOR {key} {cpu * 1e6:.1f} cpu-us/step")


GO = re.compile(r"^BenchmarkConvNetStep/(\w+)/batch=(\d+)(?:-(\d+))?\s+\d+\s+(.*)$")


def summarize(path):
    go = defaultdict(list)  # (model, batch, threads, unit) -> values
    anchors = defaultdict(list)
    cpu = None
    loads = []  # the load averages the log records (bench/cnn.sh: at the start and after each round)
    for line in open(path, errors="replace"):
        line = line.rstrip("\n")
        if line.startswith("CPU "):
            cpu = line[4:]
        if line.startswith("INFO ") and " load " in line:
            loads.append(line.split(" load ", 1)[1].split()[0])
        if line.startswith("ANCHOR convnet_"):
            _, key, val, unit = line.split(None, 3)
            anchors[(key, unit)].append(float(val))
            continue
        m = GO.match(line)
        if not m:
            continue
        model, batch, threads = m.group(1), m.group(2), m.group(3) or "1"
        rest = m.group(4).split()
        for i in range(0, len(rest) - 1, 2):
            try:
                go[(model, batch, threads, rest[i + 1])].append(float(rest[i]))
            except ValueError:
                pass
    print(f"ConvNetStep (issue 29): gonox step time / PyTorch's, target <= {TARGET}x"
          + (f"; CPU {cpu}" if cpu else "") + (f"; load {', '.join(loads)}" if loads else ""))
    for model in BATCH:
        batch = str(BATCH[model])
        for threads in ("1", "2"):
            key = f"convnet_{model}_b{batch}_t{threads}"
            for unit, gounit in (("us/step", "µs/step"), ("cpu-us/step", "cpu-µs/step")):
                g, a = go.get((model, batch, threads, gounit)), anchors.get((key, unit))
                if not g or not a:
                    continue
                gm, am = statistics.median(g), statistics.median(a)
                r = gm / am
                print(f"  {model:8s} batch {batch:>3s} {threads} thread{'s' if threads != '1' else ' '} "
                      f"{unit:12s} gonox {gm:10.0f}  torch {am:10.0f}  ratio {r:5.2f}x  "
                      f"{'met' if r <= TARGET else 'NOT met'}  (rounds: {len(g)}/{len(a)})")


def main(argv):
    if len(argv) >= 4 and argv[1] == "convnet" and argv[3] in BATCH:
        convnet(int(argv[2]), argv[3])
    elif len(argv) == 3 and argv[1] == "summarize":
        summarize(argv[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
