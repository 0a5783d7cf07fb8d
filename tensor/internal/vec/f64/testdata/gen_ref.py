#!/usr/bin/env python3
"""Writes ref.txt.gz: reference values of the float64 kernels' functions,
computed by mpmath with 60 significant digits, for accuracy_test.go.

Each line is `name x value` (expshift: `expshift x m value`), x (and m) a
float64 in Python's shortest round-trip form and value the exact function
value to 25 significant digits ("inf", "-inf" where infinite). Inputs:
random points over each function's range (both signs, log-uniform
magnitudes) and the thresholds and interval edges of the Go code. The
inputs are seeded, so the file is reproducible. Needs mpmath (Debian:
python3-mpmath); run from this directory:

    python3 gen_ref.py
"""

import gzip
import math
import random

import mpmath as mp

mp.mp.dps = 60
rng = random.Random(20261127)


def sig(x):
    return 1 / (1 + mp.exp(-x))


def gelu_arg(x):
    # The tanh form of GELU as x·σ(v): v = 2·√(2/π)·(x + 0.044715·x³).
    return 2 * mp.sqrt(2 / mp.pi) * (x + mp.mpf("0.044715") * x**3)


def gelu(x):
    return x * sig(gelu_arg(x))


def gelu_grad(x):
    v = gelu_arg(x)
    dv = 2 * mp.sqrt(2 / mp.pi) * (1 + 3 * mp.mpf("0.044715") * x**2)
    s = sig(v)
    return s + x * dv * s * (1 - s)


def ncdf(x):
    return mp.erfc(-x / mp.sqrt(2)) / 2


def npdf(x):
    return mp.exp(-x * x / 2) / mp.sqrt(2 * mp.pi)


FUNCS = {
    "exp": mp.exp,
    "log": mp.log,
    "tanh": mp.tanh,
    "sigmoid": sig,
    "gelu": gelu,
    "gelugrad": gelu_grad,
    "silu": lambda x: x * sig(x),
    "silugrad": lambda x: sig(x) * (1 + x * (1 - sig(x))),
    "softplus": lambda x: mp.log1p(mp.exp(x)),
    "logsigmoid": lambda x: -mp.log1p(mp.exp(-x)),
    "geluexact": lambda x: x * ncdf(x),
    "geluexactgrad": lambda x: ncdf(x) + x * npdf(x),
}


def logu(lo, hi):
    """A log-uniform magnitude in [lo, hi]."""
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))


def signed(xs):
    return [s * x for x in xs for s in (1, -1)]


def inputs(name):
    u = lambda lo, hi, n: [rng.uniform(lo, hi) for _ in range(n)]
    small = signed([logu(1e-300, 1.0) for _ in range(60)])
    edges = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 5e-324, -5e-324]
    if name == "exp":
        xs = u(-745.2, 709.8, 300) + small + [
            709.78, 709.782712893384, 709.7827128933841, -708.39, -708.4, -744.44, -745.13, -745.1332191019411,
            0.34657359027997264, -0.34657359027997264, 0.3465735902799727, 1e-17, -1e-17]
    elif name == "log":
        xs = [logu(5e-324, 1.7e308) for _ in range(300)]
        xs += [1 + s * logu(1e-16, 0.5) for _ in range(60) for s in (1, -1)]
        xs += [5e-324, 2.2250738585072014e-308, 2.225073858507201e-308, 1.7976931348623157e308,
               math.sqrt(2), math.nextafter(math.sqrt(2), 3), math.sqrt(0.5), math.nextafter(math.sqrt(0.5), 0),
               1.0, math.nextafter(1, 2), math.nextafter(1, 0), 2.0, 0.5]
    elif name in ("tanh",):
        xs = signed([logu(1e-300, 25) for _ in range(200)]) + signed(u(0.5, 0.75, 40)) + edges + [0.625, -0.625, 19.1, 400]
    elif name in ("geluexact", "geluexactgrad"):
        xs = u(-39, 40, 300) + small + edges
        for e in (0.75, 1.5, 3.0, 6.0, 12.0, 24.0, 38.0):
            for d in (-1e-12, 0.0, 1e-12):
                xs += [e + d, -(e + d)]
        xs += u(-1, 0, 60)  # the zero of geluexactgrad near -0.75
    elif name in ("gelugrad", "silugrad"):
        xs = u(-40, 40, 300) + small + edges + u(-2, 0, 60)  # zeros of the derivatives
    else:  # sigmoid, gelu, silu, softplus, logsigmoid
        xs = u(-745, 745, 150) + u(-40, 40, 150) + small + edges
    return xs


def fmt(v):
    if mp.isinf(v):
        return "inf" if v > 0 else "-inf"
    return mp.nstr(v, 25, min_fixed=1, max_fixed=0)


def main():
    lines = []
    for name, f in FUNCS.items():
        for x in inputs(name):
            if name == "log" and x <= 0:
                continue
            lines.append(f"{name} {x!r} {fmt(f(mp.mpf(x)))}")
    for m in (0.0, 5.0, -3.25, 100.3, 700.0, -1e3):
        for _ in range(60):
            x = m - logu(1e-10, 745)
            lines.append(f"expshift {x!r} {m!r} {fmt(mp.exp(mp.mpf(x) - mp.mpf(m)))}")
        lines.append(f"expshift {m!r} {m!r} 1.0")
    with gzip.GzipFile("ref.txt.gz", "wb", mtime=0) as f:
        f.write(("\n".join(lines) + "\n").encode())


if __name__ == "__main__":
    main()
