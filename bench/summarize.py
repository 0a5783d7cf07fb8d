#!/usr/bin/env python3
"""Reads the raw log of bench/compare.sh (go test -bench output and ANCHOR
lines, several interleaved rounds) and prints, for each target of issues
19 and 30, the median gonox figure, the median anchor, their ratio and
whether the target is met. Medians are over rounds; the spread (min-max) is
printed too, since the machine may be shared.

Usage: summarize.py [--markdown] LOG

With --markdown the run's DATE, CPU and INFO lines are printed in a fenced
block, so that the output is a Markdown page body (bench/compare.sh writes
it to bench/results.md).
"""

import re
import statistics
import sys
from collections import defaultdict

BENCH = re.compile(r"^(Benchmark\S+?)(?:-(\d+))?\s+\d+\s+(.*)$")


def parse(path):
    go = defaultdict(list)  # (name, unit) -> values
    anchors = defaultdict(list)
    info = []
    load = []  # (load average, cores) of each round
    for line in open(path, errors="replace"):
        line = line.rstrip("\n")
        if line.startswith("ANCHOR "):
            _, name, val, unit = line.split(None, 3)
            anchors[(name, unit)].append(float(val))
            continue
        if line.startswith("INFO ") or line.startswith("CPU ") or line.startswith("DATE "):
            info.append(line)
            m = re.match(r"INFO round \d+: load average ([\d.]+) .*the machine has (\d+) cores", line)
            if m:
                load.append((float(m.group(1)), int(m.group(2))))
            continue
        m = BENCH.match(line)
        if not m:
            continue
        name, rest = m.group(1), m.group(3).split()
        if name.startswith(("BenchmarkMLPStep", "BenchmarkTrainStep", "BenchmarkAttention",
                            "BenchmarkEnsembleStep", "BenchmarkPerExampleGrads")):
            name += "@" + (m.group(2) or "1")  # run with -cpu 1 and -cpu 2
        for i in range(0, len(rest) - 1, 2):
            try:
                go[(name, rest[i + 1])].append(float(rest[i]))
            except ValueError:
                pass
    return go, anchors, info, load


def med(xs):
    return statistics.median(xs) if xs else None


def paired(num, den):
    """The median over rounds of num[i]/den[i] (both measured in round i,
    minutes apart), with its range; the ratio of the medians if the rounds
    do not pair up. Paired ratios cancel most of a shared machine's drift."""
    if not num or not den:
        return None, ""
    if len(num) == len(den):
        rs = [a / b for a, b in zip(num, den)]
        return statistics.median(rs), (f"{min(rs):.2f}–{max(rs):.2f}" if len(rs) > 1 else "")
    return med(num) / med(den), ""


def spread(xs):
    return f"{min(xs):.4g}–{max(xs):.4g}" if len(xs) > 1 else ""


def main():
    args = sys.argv[1:]
    markdown = "--markdown" in args
    args = [a for a in args if a != "--markdown"]
    if len(args) != 1:
        sys.exit("usage: summarize.py [--markdown] LOG")
    go, anchors, info, load = parse(args[0])
    # Wall-clock rows of a run on a machine busier than its cores say
    # nothing about a target: another process had the cores. Their "met"
    # column says so; rows per CPU-second, of bytes or of memory stand.
    busy = max((l / c for l, c in load), default=0) > 1.5
    busy_note = f"void: load {max(l for l, _ in load):.0f} on {load[0][1]} cores" if busy else ""
    seen = set()
    if markdown:
        print("```text")
    for line in info:
        if line not in seen:
            print(line)
            seen.add(line)
    if markdown:
        print("```")

    def g(name, unit):
        return go.get((name, unit), [])

    def a(name, unit):
        return anchors.get((name, unit), [])

    rows = []

    def row(what, gv, gunit, av, aunit, ratio, target, ok):
        rows.append((what, gv, gunit, av, aunit, ratio, rr, target, ok))

    # sgemm: GFLOP/s, ratio gonox/OpenBLAS, target >= 1.0
    for t in (1, 2):
        gv = g(f"BenchmarkSgemm/1024x1024x1024/threads={t}", "GFLOP/s")
        av = a(f"sgemm_1024_t{t}", "GFLOP/s")
        r, rr = paired(gv, av)
        row(f"sgemm 1024³, {t} thread{'s' if t > 1 else ''}", gv, "GFLOP/s", av, "GFLOP/s (numpy/OpenBLAS)",
            r, "≥ 1.0x OpenBLAS", r is not None and r >= 1.0)
        if t == 1:
            # Per second of CPU time: what one core does while it runs.
            gv = g("BenchmarkSgemm/1024x1024x1024/threads=1", "GFLOP/cpu-s")
            av = a("sgemm_1024_t1", "GFLOP/cpu-s")
            if gv and av:
                r, rr = paired(gv, av)
                row("sgemm 1024³, 1 thread, per CPU-second", gv, "GFLOP/cpu-s", av, "GFLOP/cpu-s (numpy/OpenBLAS)",
                    r, "≥ 1.0x OpenBLAS", r >= 1.0)

    # dgemm (issue 30): GFLOP/s, ratio gonox/OpenBLAS, target >= 0.9; the
    # best kernel set against OpenBLAS's choice, then the AVX2 set against
    # OpenBLAS's Zen kernels.
    for what, gname, aname in [
        ("dgemm 1024³, 1 thread", "BenchmarkDgemm", "dgemm_1024_t1"),
        ("dgemm 1024³, 1 thread, AVX2 kernels (OpenBLAS Zen)", "BenchmarkDgemmAVX2", "dgemm_zen_1024_t1"),
    ]:
        for unit, per in (("GFLOP/s", ""), ("GFLOP/cpu-s", ", per CPU-second")):
            gv = g(f"{gname}/1024x1024x1024/threads=1", unit)
            av = a(aname, unit)
            if gv or av:
                r, rr = paired(gv, av)
                row(what + per, gv, unit, av, f"{unit} (numpy/OpenBLAS)", r, "≥ 0.9x OpenBLAS", r is not None and r >= 0.9)

    # Work per core of the 2-goroutine sgemm against the 1-goroutine one
    # (GFLOP per CPU-second): what splitting costs in extra work.
    w1 = g("BenchmarkSgemm/1024x1024x1024/threads=1", "GFLOP/cpu-s")
    w2 = g("BenchmarkSgemm/1024x1024x1024/threads=2", "GFLOP/cpu-s")
    if w1 and w2:
        r, rr = paired(w2, w1)
        row("sgemm 1024³, work per core, 2 threads vs 1", w2, "GFLOP/cpu-s", w1, "GFLOP/cpu-s (1 thread)",
            r, "(for scale)", None)

    # MLP steps: µs, ratio gonox/PyTorch (lower is better)
    mlps = [
        ("MLP 32-128-256-128-4, batch 16", "sizes=[32_128_256_128_4]/batch=16", "mlp_32-128-256-128-4_b16", 0.3, (1,)),
        ("MLP 784-1024-1024-10, batch 256", "sizes=[784_1024_1024_10]/batch=256", "mlp_784-1024-1024-10_b256", 0.7, (1, 2)),
    ]
    for what, gname, aname, target, cores in mlps:
        for c in cores:
            suffix = "" if c == 1 else f"-{c}"
            gv = go.get((f"BenchmarkMLPStep/{gname}@{c}", "µs/step"), [])
            av = a(f"{aname}_t{c}", "us/step")
            r, rr = paired(gv, av)
            row(f"{what}, {c} core{'s' if c > 1 else ''}", gv, "µs/step", av, f"µs/step (PyTorch {c}t)",
                r, f"≤ {target}x PyTorch", r is not None and r <= target)
            if c == 1:
                gv = go.get((f"BenchmarkMLPStep/{gname}@1", "cpu-µs/step"), [])
                av = a(f"{aname}_t1", "cpu-us/step")
                if gv and av:
                    r, rr = paired(gv, av)
                    row(f"{what}, 1 core, CPU time", gv, "cpu-µs/step", av, "cpu-µs/step (PyTorch 1t)",
                        r, f"≤ {target}x PyTorch", r <= target)

    # bf16 mixed precision (issue 31): the MLP 784-1024-1024-10 at batch
    # 256 under nn.MixedBFloat16 against float32 (BenchmarkMLPStepPolicy
    # alternates the two steps and reports their medians), and
    # examples/moe -dtype bf16 against its float32 step of the same round.
    for unit, per in (("speedup", ""), ("cpu-speedup", ", CPU time")):
        sp = g("BenchmarkMLPStepPolicy@1", unit)
        if sp:
            cpu = "cpu-" if per else ""
            f32, bf = g("BenchmarkMLPStepPolicy@1", f"f32-{cpu}µs/step"), g("BenchmarkMLPStepPolicy@1", f"bf16mixed-{cpu}µs/step")
            rr = spread(sp)
            row(f"MLP 784-1024-1024-10 b256 step, bf16 policy vs float32, 1 thread{per}", bf, f"{cpu}µs/step", f32,
                f"{cpu}µs/step (float32)", med(sp), "≥ 1.5x", med(sp) >= 1.5)
    for gname, what in (("single", "examples/moe"), ("dense", "examples/moe -ffn dense -hidden 512")):
        for c in (1, 2):
            for unit in ("chars/s", "chars/cpu-s") if c == 1 else ("chars/s",):
                f32 = go.get((f"BenchmarkTrainStep/{gname}@{c}", unit), [])
                bf = go.get((f"BenchmarkTrainStep/{gname}_bf16@{c}", unit), [])
                if f32 and bf:
                    r, rr = paired(bf, f32)
                    per = ", per CPU-second" if unit == "chars/cpu-s" else ""
                    target, ok = ("≥ 1.3x", r >= 1.3) if c == 1 else ("(for scale)", None)
                    row(f"{what} -dtype bf16 vs float32, {c} thread{'s' if c > 1 else ''}{per}", bf, unit, f32,
                        f"{unit} (float32)", r, target, ok)

    # Transforms (issue 30): the ensemble of 8 MLPs 64-128-10 at batch 16,
    # one Adam step, through Vmap against a Go loop over the models; the
    # per-example gradients of the MLP 64-128-10 on batch 256 through
    # Vmap(Grad) against the hand-batched computation and a loop.
    for unit in ("µs/step", "cpu-µs/step"):
        vm, lp = g("BenchmarkEnsembleStep/vmap@1", unit), g("BenchmarkEnsembleStep/loop@1", unit)
        if vm and lp:
            r, rr = paired(lp, vm)
            per = ", CPU time" if unit.startswith("cpu") else ""
            row(f"ensemble of 8 MLPs, Vmap step: speed-up over a loop, 1 thread{per}", vm, unit, lp,
                f"{unit} (loop)", r, "≥ 3x", r >= 3)
        vm, mn, lp = (g(f"BenchmarkPerExampleGrads/{k}@1", unit) for k in ("vmap", "manual", "loop"))
        per = ", CPU time" if unit.startswith("cpu") else ""
        if vm and mn:
            r, rr = paired(vm, mn)
            row(f"per-example gradients b256, Vmap(Grad) vs hand-batched{per}", vm, unit, mn, f"{unit} (manual)",
                r, "≤ 1.25x", r <= 1.25)
        if vm and lp:
            r, rr = paired(lp, vm)
            row(f"per-example gradients b256, Vmap(Grad): speed-up over a loop{per}", vm, unit, lp, f"{unit} (loop)",
                r, "≥ 4x", r >= 4)

    # DP step scaling
    dp = {n: g(f"BenchmarkDPStep/devices={n}/step", "ms/step") for n in (1, 2, 8)}
    ddp = a("ddp_step_2proc", "ms/step")
    if dp[1] and dp[2]:
        r, rr = paired(dp[1], dp[2])
        row("DP step 784-1024-1024-10 b256 Adam: 2 dev vs 1 dev", dp[2], "ms/step", dp[1], "ms/step (1 device)",
            r, "speed-up ≥ 1.7x", r >= 1.7)
    if dp[2] and dp[8]:
        r, rr = paired(dp[8], dp[2])
        row("DP step: 8 dev vs 2 dev", dp[8], "ms/step", dp[2], "ms/step (2 devices)",
            r, "≤ 1.15x", r <= 1.15)
    if dp[2] and ddp:
        r, rr = paired(dp[2], ddp)
        row("DP step, 2 dev vs PyTorch DDP gloo 2 procs (Adam)", dp[2], "ms/step", ddp, "ms/step (DDP)",
            r, "(for scale)", None)

    # Optimizer update, ZeRO-sharded over 1 and 2 devices
    u1 = g("BenchmarkShardedUpdate/adam/devices=1", "ms/update")
    u2 = g("BenchmarkShardedUpdate/adam/devices=2", "ms/update")
    if u1 and u2:
        r, rr = paired(u1, u2)
        row("Adam update 784-1024-1024-10, ZeRO 2 dev vs 1", u2, "ms/update", u1, "ms/update (1 device)",
            r, "speed-up (for scale)", None)

    # psum vs copy bandwidth
    ps = g("BenchmarkPsum64MiB", "busGB/s")
    cp = g("BenchmarkCopy64MiB", "GB/s")
    gloo = a("gloo_allreduce_64MiB_2proc", "busGB/s")
    if ps and cp:
        n = 8
        # Copy GB/s counts bytes read + written. An n-way all-reduce of S
        # bytes in shared memory must read n·S and write S (one shared
        # result): (n+1)·S of traffic, reported as bus bytes S·2(n-1)/n.
        bound = [c * (2 * (n - 1) / n) / (n + 1) for c in cp]
        r, rr = paired(ps, bound)
        row("psum 64 MiB over 8 devices", ps, "busGB/s", bound, "busGB/s (memory bound from copy)",
            r, "≥ 0.5x bound", r >= 0.5)
    pso = g("BenchmarkPsum64MiBGOGCoff", "busGB/s")
    if pso and cp:
        bound = [c * (2 * (8 - 1) / 8) / (8 + 1) for c in cp]
        r, rr = paired(pso, bound)
        row("psum 64 MiB over 8 devices, GOGC=off", pso, "busGB/s", bound, "busGB/s (memory bound from copy)",
            r, "≥ 0.5x bound", r >= 0.5)
    if ps and gloo:
        r, rr = paired(ps, gloo)
        row("psum 64 MiB vs gloo all-reduce 2 procs", ps, "busGB/s", gloo, "busGB/s (gloo)",
            r, "(for scale)", None)
    if cp:
        rr = ""
        row("copy 64 MiB, all cores", cp, "GB/s", [], "", None, "(anchor)", None)

    # examples/moe (issue 31): training steps of the MoE model and its
    # dense variant against the same models in PyTorch, chars/s (higher
    # is better), at 1 and 2 threads; scaling; memory.
    for what, gname, aname in [("examples/moe step (MoE, 2.4M params)", "single", "moe"),
                               ("examples/moe -ffn dense -hidden 512 step", "dense", "moe_dense")]:
        for c in (1, 2):
            gv = go.get((f"BenchmarkTrainStep/{gname}@{c}", "chars/s"), [])
            av = a(f"{aname}_t{c}", "chars/s")
            if gv or av:
                r, rr = paired(gv, av)
                row(f"{what}, {c} thread{'s' if c > 1 else ''}", gv, "chars/s", av, f"chars/s (PyTorch {c}t)",
                    r, "≥ 1.5x PyTorch", r is not None and r >= 1.5)
            if c == 1:
                gv = go.get((f"BenchmarkTrainStep/{gname}@1", "chars/cpu-s"), [])
                av = a(f"{aname}_t1", "chars/cpu-s")
                if gv and av:
                    r, rr = paired(gv, av)
                    row(f"{what}, 1 thread, per CPU-second", gv, "chars/cpu-s", av, "chars/cpu-s (PyTorch 1t)",
                        r, "≥ 1.5x PyTorch", r >= 1.5)
        b1 = go.get((f"BenchmarkTrainStep/{gname}@1", "B/op"), [])
        if b1:
            rr = ""
            row(f"{what}, bytes allocated a step (-benchmem)", [x / 1e6 for x in b1], "MB/step", [], "", None, "(for scale)", None)
    s1 = go.get(("BenchmarkTrainStep/single@1", "chars/s"), [])
    s2 = go.get(("BenchmarkTrainStep/single@2", "chars/s"), [])
    if s1 and s2:
        r, rr = paired(s2, s1)
        row("examples/moe step, 2 threads vs 1", s2, "chars/s", s1, "chars/s (1 thread)", r, "≥ 1.7x", r >= 1.7)
    ep = go.get(("BenchmarkTrainStep/dp_ep@2", "chars/s"), [])
    if ep and s1:
        r, rr = paired(ep, s1)
        row("examples/moe dp_ep 8 devices on 2 cores vs single on 1", ep, "chars/s", s1, "chars/s (single, 1 core)",
            r, "≥ 1.8x", r >= 1.8)
    rss = g("BenchmarkMoEPeakRSS/single", "MB")
    trss = a("moe_rss_train", "MB")
    if rss or trss:
        r, rr = paired(rss, trss)
        row("examples/moe -strategy single, 20 steps: peak RSS vs PyTorch's training increment", rss, "MB", trss,
            "MB (PyTorch peak − after import torch)", r, "≤ 1.5x", r is not None and r <= 1.5)
    # Attention at context 4096 (batch 1, 4 heads of 32), forward and
    # backward: time against PyTorch's matmul-softmax-matmul, and the bytes
    # a pass allocates against Q, K, V and the output together (8 MiB).
    for T in (64, 1024, 4096):
        gv = go.get((f"BenchmarkAttention/context={T}/fused@1", "ms/pass"), [])
        av = a(f"attention_T{T}_t1", "ms/pass")
        if gv or av:
            r, rr = paired(gv, av)
            target = "≤ 0.7x PyTorch" if T == 4096 else "(for scale)"
            row(f"causal attention fwd+bwd, context {T}, 1 thread", gv, "ms/pass", av, "ms/pass (PyTorch 1t)",
                r, target, (r is not None and r <= 0.7) if T == 4096 else None)
    bm = go.get(("BenchmarkAttention/context=4096/fused@1", "B/op"), [])
    if bm:
        qkvo = 4 * 4096 * 4 * 32 * 4
        r, rr = paired(bm, [qkvo] * len(bm))
        row("attention context 4096: bytes allocated fwd+bwd vs Q, K, V, O", [x / 2**20 for x in bm], "MiB", [qkvo / 2**20] * len(bm),
            "MiB (Q, K, V, O)", r, "< 4x", r < 4)

    print()
    print("| what | gonox (median, range) | anchor (median, range) | ratio (median of rounds, range) | target | met |")
    print("|---|---|---|---|---|---|")
    for what, gv, gu, av, au, r, rr, target, ok in rows:
        gs = f"{med(gv):.4g} {gu}" + (f" ({spread(gv)})" if len(gv) > 1 else "") if gv else "—"
        as_ = f"{med(av):.4g} {au}" + (f" ({spread(av)})" if len(av) > 1 else "") if av else "—"
        rs = (f"{r:.2f}x" + (f" ({rr})" if rr else "")) if r is not None else "—"
        met = "—" if ok is None else ("yes" if ok else "**no**")
        wall = not any(u in gu + au for u in ("cpu", "MB", "MiB", "B/op"))
        if busy and ok is not None and wall:
            met = busy_note
        print(f"| {what} | {gs} | {as_} | {rs} | {target} | {met} |")
    state_table(go, load)


def state_table(go, load):
    """Prints, per round, the machine-state probes (the 2-device DP step's
    CPU time over the 1-device step's, measured just before each two-core
    figure: ~1.0 when the two cores run freely, ~1.2 when they slow each
    other) beside that round's two-core ratios."""
    points = ("dp", "moe-cpu1", "moe-cpu2", "dp_ep")

    def probe(point, i):
        name = "BenchmarkDPStep" if point == "dp" else f"BenchmarkStateProbe/{point}"
        one = go.get((f"{name}/devices=1/step", "cpu-ms/step"), [])
        two = go.get((f"{name}/devices=2/step", "cpu-ms/step"), [])
        if i < len(one) and i < len(two) and one[i] > 0:
            return f"{two[i] / one[i]:.2f}"
        return "—"

    def ratio(num, den, i):
        n, d = go.get(num, []), go.get(den, [])
        if i < len(n) and i < len(d) and d[i] > 0:
            return f"{n[i] / d[i]:.2f}x"
        return "—"

    rounds = len(go.get(("BenchmarkStateProbe/dp_ep/devices=2/step", "cpu-ms/step"), []))
    if rounds == 0:
        return
    print()
    print("Machine state by round: the 2-device DP step's CPU time over the 1-device step's, measured")
    print("just before each two-core figure (~1.0: the two cores run freely; ~1.2: they slow each other),")
    print("beside that round's two-core ratios.")
    print()
    print("| round | load | probe: DP row | before MoE 1 thread | before MoE 2 threads | before dp_ep "
          "| DP 2 vs 1 dev | MoE 2 vs 1 thread | dp_ep vs single |")
    print("|---|---|---|---|---|---|---|---|---|")
    for i in range(rounds):
        ld = f"{load[i][0]:.2f}" if i < len(load) else "—"
        dp = ratio(("BenchmarkDPStep/devices=1/step", "ms/step"), ("BenchmarkDPStep/devices=2/step", "ms/step"), i)
        moe = ratio(("BenchmarkTrainStep/single@2", "chars/s"), ("BenchmarkTrainStep/single@1", "chars/s"), i)
        ep = ratio(("BenchmarkTrainStep/dp_ep@2", "chars/s"), ("BenchmarkTrainStep/single@1", "chars/s"), i)
        cells = [probe(p, i) for p in points]
        print(f"| {i + 1} | {ld} | " + " | ".join(cells) + f" | {dp} | {moe} | {ep} |")


if __name__ == "__main__":
    main()
