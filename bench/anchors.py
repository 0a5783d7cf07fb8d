#!/usr/bin/env python3
"""Anchor measurements for bench/compare.sh: the same problems as gonox's
benchmarks, run by numpy (OpenBLAS) and PyTorch on this machine.

Each subcommand prints one line per figure:

    ANCHOR <name> <value> <unit>

and, for the BLAS it runs, an INFO line naming the library and the kernel it
chose (threadpoolctl), so that a figure is never credited to the wrong
library. Timings are medians of several repetitions after a warm-up.

Usage: anchors.py sgemm THREADS | dgemm THREADS [CORETYPE] | mlp THREADS SIZES BATCH | ddp | allreduce
       anchors.py attention THREADS | moe THREADS moe|dense [STEPS] | moe-rss moe|dense [STEPS]
       anchors.py moe-check EXPORT_DIR [TESTDATA_JSON]
"""

import math
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


def attention(threads):
    """Forward and backward of causal attention, 4 heads of 32, written as
    PyTorch 1.13 has it (matmul, mask, softmax, matmul: it has no fused
    scaled_dot_product_attention yet), at the shapes of
    tensor.BenchmarkAttention: context 64 (batch 32), 1024 (batch 2) and
    4096 (batch 1)."""
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(threads)
    threadpool_limits(limits=threads)  # OpenBLAS too (see mlp)
    N, H = 4, 32
    for T, B in ((64, 32), (1024, 2), (4096, 1)):
        g = torch.Generator().manual_seed(1)
        q, k, v = (torch.randn(B, T, N, H, generator=g, requires_grad=True) for _ in range(3))
        dout = torch.randn(B, T, N, H, generator=g)
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)

        def step():
            qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
            s = (qt * (1 / math.sqrt(H))) @ kt.transpose(-1, -2)
            w = torch.softmax(s.masked_fill(mask, float("-inf")), -1)
            o = (w @ vt).transpose(1, 2)
            q.grad = k.grad = v.grad = None
            o.backward(dout)

        t = median_time(step, reps=10 if T < 4096 else 5, warm=2, min_time=1.0)
        print(f"ANCHOR attention_T{T}_t{threads} {t * 1e3:.2f} ms/pass")


def moe_model(torch, c):
    """The examples/moe model in PyTorch, parameter for parameter (c: a
    dict of Vocab, Context, Dim, Layers, Heads, Experts, Hidden, TopK,
    Capacity and FFN, "moe" or "dense"): token and learned position
    embeddings; pre-norm blocks of causal multi-head attention (no
    biases) and a feed-forward layer, either a mixture of experts (router
    without bias, top-k of the logits with a softmax over those k, global
    capacity ceil(N·k/E·factor) with choices ranked by gate within each
    expert, ties by position, the rest dropped; experts GELU(tanh) MLPs
    without biases; Switch aux and ST-MoE z losses) or a dense GELU MLP;
    a final LayerNorm and a linear head with bias. Weights are [in, out],
    as gonox stores them."""
    import numpy as np

    F = torch.nn.functional
    V, T, D, L, NH = c["Vocab"], c["Context"], c["Dim"], c["Layers"], c["Heads"]
    E, Hd, K, cap, ffn = c["Experts"], c["Hidden"], c["TopK"], c["Capacity"], c["FFN"]

    def P(*shape, fan_in=None, std=None):
        if std is not None:
            return torch.nn.Parameter(torch.randn(*shape) * std)
        lim = 1 / math.sqrt(fan_in)
        return torch.nn.Parameter(torch.empty(*shape).uniform_(-lim, lim))

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.norm2 = torch.nn.LayerNorm(D), torch.nn.LayerNorm(D)
            self.wq, self.wk, self.wv, self.wo = (P(D, D, fan_in=D) for _ in range(4))
            if ffn == "dense":
                self.up, self.down = P(D, Hd, fan_in=D), P(Hd, D, fan_in=Hd)
            else:
                self.router = P(D, E, fan_in=D)
                self.up, self.down = P(E, D, Hd, fan_in=D), P(E, Hd, D, fan_in=Hd)

        def attn(self, x):
            B = x.shape[0]
            heads = lambda w: (x @ w).view(B, -1, NH, D // NH).transpose(1, 2)
            q, k, v = heads(self.wq), heads(self.wk), heads(self.wv)
            s = (q @ k.transpose(-1, -2)) * (1 / math.sqrt(D // NH))
            t = x.shape[1]
            s = s.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
            o = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, t, D)
            return o @ self.wo

        def moe(self, x):
            shape = x.shape
            x = x.reshape(-1, D)
            N = x.shape[0]
            logits = x @ self.router
            probs = torch.softmax(logits, -1)
            top, ids = torch.topk(logits, K, -1)
            gates = torch.softmax(top, -1).reshape(-1)
            ids = ids.reshape(-1)
            C = math.ceil(float(np.float32(N * K / E * cap)))
            # Rank within each expert by descending gate, ties by position.
            o1 = torch.sort(-gates.detach(), stable=True).indices
            o2 = torch.sort(ids[o1], stable=True).indices
            order = o1[o2]
            load = torch.bincount(ids, minlength=E)
            first = torch.cumsum(load, 0) - load
            rank = torch.empty_like(ids)
            rank[order] = torch.arange(N * K) - first[ids[order]]
            kept = torch.nonzero(rank < C).squeeze(1)  # choice order
            out = torch.zeros_like(x)
            ke = ids[kept]
            for e in range(E):
                ch = kept[ke == e]
                if ch.numel() == 0:
                    continue
                src = ch // K
                h = F.gelu(x[src] @ self.up[e], approximate="tanh")
                out.index_add_(0, src, (h @ self.down[e]) * gates[ch, None])
            f = load.to(probs.dtype) / (N * K)
            aux = (f * probs.mean(0)).sum() * E
            z = torch.logsumexp(logits, -1).square().mean()
            return out.reshape(shape), 0.01 * aux + 0.001 * z

        def forward(self, x):
            x = x + self.attn(self.norm1(x))
            h = self.norm2(x)
            if ffn == "dense":
                return x + F.gelu(h @ self.up, approximate="tanh") @ self.down, 0.0
            y, aux = self.moe(h)
            return x + y, aux

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed, self.pos = P(V, D, std=0.02), P(T, D, std=0.02)
            self.blocks = torch.nn.ModuleList(Block() for _ in range(L))
            self.norm = torch.nn.LayerNorm(D)
            self.head_w = P(D, V, fan_in=D)
            self.head_b = P(V, fan_in=D)

        def forward(self, ids, y):
            x = self.embed[ids] + self.pos[: ids.shape[1]]
            aux = 0.0
            for b in self.blocks:
                x, a = b(x)
                aux = aux + a
            logits = self.norm(x) @ self.head_w + self.head_b
            ce = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
            return ce, ce + aux

    return Model()


# gonox's parameter paths (pytree) for the PyTorch model's parameters.
def _gonox_name(name):
    import re

    m = re.fullmatch(r"blocks\.(\d+)\.(\w+)\.?(\w+)?", name)
    if m:
        i, a, b = m.groups()
        pre = f"Blocks[{i}]."
        if a in ("norm1", "norm2"):
            return pre + ("Norm1" if a == "norm1" else "Norm2") + "." + ("Weight" if b == "weight" else "Bias")
        attn = {"wq": "QueryProj", "wk": "KeyProj", "wv": "ValueProj", "wo": "OutputProj"}
        if a in attn:
            return pre + f"Attn.{attn[a]}.W"
        return pre + {"router": "MoE.Router", "up": "MoE.Up", "down": "MoE.Down"}[a]
    return {"embed": "Embed.W", "pos": "Pos", "norm.weight": "Norm.Weight", "norm.bias": "Norm.Bias",
            "head_w": "Head.W", "head_b": "Head.B"}[name]


def moe_config(ffn):
    c = {"Vocab": 91, "Context": 64, "Dim": 128, "Layers": 4, "Heads": 4, "Experts": 8, "Hidden": 256,
         "TopK": 2, "Capacity": 1.25, "FFN": ffn}
    if ffn == "dense":
        c.update(Experts=1, TopK=1, Hidden=512)
    return c


def moe_check(export_dir, out_json=None):
    """Loads the weights gonox's TestExportForTorch wrote into moe_model
    and prints both initial losses; with out_json, writes PyTorch's figures
    for TestLossMatchesPyTorch. Exits non-zero when they differ."""
    import json

    import numpy as np
    import torch

    torch.set_num_threads(1)
    cases = json.load(open(os.path.join(export_dir, "manifest.json")))
    out, bad = [], False
    for c in cases:
        model = moe_model(torch, c)
        data = np.fromfile(os.path.join(export_dir, c["name"] + ".bin"), dtype="<f4")
        byname = {w["name"]: w for w in c["Weights"]}
        count = 0
        with torch.no_grad():
            for name, p in model.named_parameters():
                gname = _gonox_name(name)
                if c["FFN"] == "dense":
                    gname = gname.replace("MoE.Up", "FFN.Layers[0].W").replace("MoE.Down", "FFN.Layers[1].W")
                w = byname.pop(gname)
                assert list(p.shape) == w["shape"], (name, p.shape, w["shape"])
                n = p.numel()
                p.copy_(torch.from_numpy(data[w["offset"]:][:n].reshape(p.shape).copy()))
                count += n
        assert not byname, f"gonox parameters the PyTorch model lacks: {sorted(byname)}"
        T = c["Context"]
        x = torch.tensor(c["X"], dtype=torch.long).view(-1, T)
        y = torch.tensor(c["Y"], dtype=torch.long).view(-1, T)
        with torch.no_grad():
            ce, total = model(x, y)
        print(f"INFO moe-check {c['name']}: params torch {count} gonox {c['params']}; "
              f"ce torch {ce.item():.6f} gonox {c['ce']:.6f}; total torch {total.item():.6f} gonox {c['total']:.6f}")
        if count != c["params"] or abs(ce.item() - c["ce"]) > 2e-5 * abs(c["ce"]) or abs(total.item() - c["total"]) > 2e-5 * abs(c["total"]):
            bad = True
        out.append({"name": c["name"], "args": c["args"], "starts": c["starts"], "params": count,
                    "ce": ce.item(), "total": total.item()})
    if out_json:
        with open(out_json, "w") as f:
            json.dump(out, f, indent=1)
            f.write("\n")
    if bad:
        sys.exit("moe-check: the PyTorch model's loss differs from gonox's")


def _moe_train(torch, ffn, steps, warm):
    torch.manual_seed(0)
    c = moe_config(ffn)
    model = moe_model(torch, c)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, c["Vocab"], (32, c["Context"]), generator=g)
    y = torch.randint(0, c["Vocab"], (32, c["Context"]), generator=g)

    def step():
        opt.zero_grad(set_to_none=True)
        _, loss = model(x, y)
        loss.backward()
        opt.step()

    return step


def _moe_name(ffn):
    return "moe" if ffn == "moe" else "moe_" + ffn


def moe(threads, ffn, steps=20):
    """Training steps (Adam) of the examples/moe model (ffn "moe": the
    default, 2,397,275 parameters; "dense": -ffn dense -hidden 512) on a
    batch of 32×64 characters, as examples/moe's BenchmarkTrainStep/single
    and /dense: median of steps after 3 warm-up steps."""
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(threads)
    threadpool_limits(limits=threads)  # OpenBLAS too (see mlp)
    step = _moe_train(torch, ffn, steps, 3)
    cpu = []
    t = median_time(step, reps=steps, warm=3, cpu=cpu if threads == 1 else None)
    print(f"ANCHOR {_moe_name(ffn)}_t{threads} {32 * 64 / t:.0f} chars/s")
    if threads == 1:
        print(f"ANCHOR {_moe_name(ffn)}_t{threads} {32 * 64 / cpu[0]:.0f} chars/cpu-s")


def moe_rss(ffn, steps=20):
    """Peak resident memory of steps training steps of the model (1
    thread), beside the process's peak after import torch: the training's
    increment is what gonox's whole process is compared with."""
    import resource

    import torch

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    torch.set_num_threads(1)
    step = _moe_train(torch, ffn, steps, 0)
    for _ in range(steps):
        step()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"ANCHOR {_moe_name(ffn)}_rss_import {base:.0f} MB")
    print(f"ANCHOR {_moe_name(ffn)}_rss_peak {peak:.0f} MB")
    print(f"ANCHOR {_moe_name(ffn)}_rss_train {peak - base:.0f} MB")


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
    elif cmd == "attention":
        attention(int(argv[2]))
    elif cmd == "moe":
        moe(int(argv[2]), argv[3], int(argv[4]) if len(argv) > 4 else 20)
    elif cmd == "moe-rss":
        moe_rss(argv[2], int(argv[3]) if len(argv) > 3 else 20)
    elif cmd == "moe-check":
        moe_check(argv[2], argv[3] if len(argv) > 3 else None)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
