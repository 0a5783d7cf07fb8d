#!/usr/bin/python3
"""Writes torch_spatial.json: PyTorch's outputs and gradients for the
spatial operations a vision model reaches for beyond convolutions and
pooling:

- F.pad with mode "reflect", "replicate" and "circular" on [N, C, L],
  [N, C, H, W] and [N, C, D, H, W] inputs, asymmetric pads (tensor.PadWith);
- Conv1d/2d/3d with padding_mode "reflect", "replicate" and "circular",
  with strides, dilations, groups, padding="same" (nn.Conv's PaddingMode):
  the input, weight and bias gradients;
- F.interpolate in modes "nearest", "nearest-exact", "linear",
  "bilinear", "trilinear", "bicubic" and "area", by size and by scale_factor (with and
  without recompute_scale_factor), align_corners on and off, up and down
  (tensor.Interpolate, nn.Upsample);
- F.pixel_shuffle and F.pixel_unshuffle (tensor.PixelShuffle,
  PixelUnshuffle);
- F.unfold and F.fold (im2col, col2im: tensor.Unfold, Fold, nn.Unfold,
  nn.Fold) with kernel, dilation, padding and stride per dimension.

Each case backpropagates a random cotangent g of the output and records
the input gradient. Everything is float64, written with 17 significant
digits, so that the Go side (torch_spatial_test.go) reads the values torch
computed with and runs gonox in float64 too. Pads are written one
[lo, hi] pair per dimension of the input, the first dimension first
(F.pad lists the last dimension first). Run with Debian's python3-torch
(PyTorch 1.13):

    /usr/bin/python3 nn/testdata/torch_spatial.py

and commit the JSON: CI does not need torch.
"""
import os
import torch
import torch.nn as tnn
import torch.nn.functional as F

import sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ in nn/testdata
from torchcase import t, write  # noqa: E402

torch.manual_seed(61)
torch.set_default_dtype(torch.float64)
cases = []


def dyadic(x):
    """x rounded to a multiple of 1/64: short in JSON, exact in binary."""
    return torch.round(x * 64) / 64


def add(name, kind, config, fn, x, params=None):
    """Runs y = fn(x), backpropagates a random cotangent g, and records x,
    the parameters, y, g and the gradients (dx, d<name>). The inputs,
    parameters and cotangent are multiples of 1/64 (dyadic)."""
    params = params or {}
    with torch.no_grad():
        for p in params.values():
            p.copy_(dyadic(p))
    x = dyadic(x).detach().clone().requires_grad_(True)
    tensors = {"x": t(x)}
    for n, p in params.items():
        tensors[n] = t(p)
    y = fn(x)
    g = dyadic(torch.randn_like(y))
    y.backward(g)
    tensors.update({"y": t(y), "g": t(g), "dx": t(x.grad)})
    for n, p in params.items():
        tensors["d" + n] = t(p.grad)
    cases.append({"name": name, "kind": kind, "config": config, "tensors": tensors})


def torch_pads(pairs):
    """F.pad's flat list (last dimension first) from per-dimension pairs of
    the spatial dimensions."""
    out = []
    for lo, hi in reversed(pairs):
        out += [lo, hi]
    return out


# F.pad: the spatial dimensions padded, N and C left alone.
for mode in ["reflect", "replicate", "circular"]:
    for shape, spatial in [((2, 3, 5), [(2, 4)]), ((2, 2, 4, 5), [(3, 1), (0, 4)]), ((1, 2, 3, 4, 3), [(1, 2), (2, 0), (1, 1)])]:
        if mode == "circular":
            spatial = [(min(lo, n), min(hi, n)) for (lo, hi), n in zip(spatial, shape[2:])]
        else:
            spatial = [(min(lo, n - 1), min(hi, n - 1)) for (lo, hi), n in zip(spatial, shape[2:])]
        pairs = [(0, 0), (0, 0)] + spatial
        add("pad_%s_%dd" % (mode, len(spatial)), "pad", {"mode": mode, "pads": pairs},
            lambda x, m=mode, s=spatial: F.pad(x, torch_pads(s), mode=m), torch.randn(*shape))

# Conv with a padding mode.
conv_cases = [
    # nd, in, out, kernel, stride, padding, dilation, groups, bias, input spatial
    (1, 2, 3, 3, 1, 2, 1, 1, True, (7,)),
    (2, 2, 4, 3, 2, 1, 1, 2, True, (6, 5)),
    (2, 3, 2, (3, 2), 1, (2, 1), (2, 1), 1, False, (7, 6)),
    (3, 2, 2, 2, 1, 1, 1, 1, True, (3, 4, 3)),
]
for mode in ["reflect", "replicate", "circular"]:
    for i, (nd, cin, cout, k, s, p, d, gr, bias, sp) in enumerate(conv_cases):
        cls = [None, tnn.Conv1d, tnn.Conv2d, tnn.Conv3d][nd]
        m = cls(cin, cout, k, stride=s, padding=p, dilation=d, groups=gr, bias=bias, padding_mode=mode)
        params = {"weight": m.weight}
        if bias:
            params["bias"] = m.bias
        pp = p if isinstance(p, tuple) else (p,) * nd
        add("conv_%s_%d" % (mode, i), "conv", {"mode": mode, "stride": s, "dilation": d, "groups": gr,
            "padding": [[v, v] for v in pp]}, m, torch.randn(1 if nd == 3 else 2, cin, *sp), params)
    # padding="same" (stride 1) with an even kernel: the odd element at the high end.
    m = tnn.Conv2d(2, 3, (4, 3), padding="same", dilation=(1, 2), padding_mode=mode)
    add("conv_%s_same" % mode, "conv", {"mode": mode, "stride": 1, "dilation": [1, 2], "groups": 1, "same": True},
        m, torch.randn(1, 2, 6, 7), {"weight": m.weight, "bias": m.bias})

# F.interpolate.
interp_cases = [
    # mode, input shape, size, scale_factor, align_corners, recompute
    ("nearest", (2, 2, 5), [8], None, None, None),
    ("nearest", (2, 2, 5), [3], None, None, None),
    ("nearest", (2, 2, 5), [10], None, None, None),
    ("nearest", (1, 2, 4, 5), None, [1.5, 2.5], None, None),
    ("nearest", (1, 2, 3, 4, 3), [5, 3, 7], None, None, None),
    ("nearest", (1, 2, 7, 6), None, [0.6, 0.5], None, None),
    ("nearest-exact", (2, 2, 5), [8], None, None, None),
    ("nearest-exact", (1, 2, 4, 5), None, [1.5, 2.5], None, None),
    ("nearest-exact", (1, 2, 7, 6), [4, 3], None, None, None),
    ("nearest-exact", (1, 1, 3, 2, 4), None, 2.0, None, None),
    ("linear", (2, 2, 5), [8], None, False, None),
    ("linear", (2, 2, 5), [8], None, True, None),
    ("linear", (2, 2, 5), None, [1.5], False, None),
    ("linear", (2, 2, 5), None, [1.5], False, True),
    ("linear", (2, 2, 7), [3], None, False, None),
    ("linear", (2, 2, 7), [1], None, True, None),
    ("bilinear", (1, 2, 4, 5), [7, 9], None, False, None),
    ("bilinear", (1, 2, 4, 5), [7, 9], None, True, None),
    ("bilinear", (1, 2, 4, 5), None, 2.0, False, None),
    ("bilinear", (1, 2, 4, 5), None, [2.3, 1.7], False, None),
    ("bilinear", (1, 2, 4, 5), None, [2.3, 1.7], True, None),
    ("bilinear", (1, 2, 8, 9), [3, 5], None, False, None),
    ("bilinear", (1, 2, 8, 9), [3, 5], None, True, None),
    ("bilinear", (1, 2, 4, 5), [4, 8], None, False, None),
    ("trilinear", (1, 2, 3, 4, 3), [5, 6, 4], None, False, None),
    ("trilinear", (1, 2, 3, 4, 3), [5, 6, 4], None, True, None),
    ("trilinear", (1, 1, 3, 4, 3), None, [1.5, 0.5, 2.0], False, None),
    ("bicubic", (1, 2, 4, 5), [7, 9], None, False, None),
    ("bicubic", (1, 2, 4, 5), [7, 9], None, True, None),
    ("bicubic", (1, 2, 4, 5), None, [2.3, 1.7], False, None),
    ("bicubic", (1, 2, 8, 9), [3, 5], None, False, None),
    ("bicubic", (1, 2, 8, 9), [3, 5], None, True, None),
    ("bicubic", (1, 1, 2, 3), [6, 1], None, False, None),
    ("bicubic", (1, 1, 4, 4), None, 1.2, False, None),
    ("nearest-exact", (1, 1, 4, 4), None, 1.2, None, None),
    ("bilinear", (1, 1, 4, 4), None, 1.2, False, None),
    ("area", (2, 2, 7), [3], None, None, None),
    ("area", (1, 2, 5, 7), [8, 3], None, None, None),
    ("area", (1, 2, 6, 4), None, 0.5, None, None),
    ("area", (1, 1, 3, 5, 4), [2, 3, 6], None, None, None),
]
for i, (mode, shape, size, scale, ac, rec) in enumerate(interp_cases):
    cfg = {"mode": mode}
    kw = {"mode": mode}
    if size is not None:
        cfg["size"] = size
        kw["size"] = size
    if scale is not None:
        cfg["scale_factor"] = scale
        kw["scale_factor"] = scale
    if ac is not None:
        cfg["align_corners"] = ac
        kw["align_corners"] = ac
    if rec is not None:
        cfg["recompute_scale_factor"] = rec
        kw["recompute_scale_factor"] = rec
    if mode == "bicubic" and scale is not None and not ac:
        # PyTorch 1.13's bicubic backward copies the cotangent of a
        # dimension whose size is kept, while its forward interpolates
        # with the scale factor (gradcheck fails): the Go test compares
        # the output only, and checks gonox's gradient by finite
        # differences.
        sc = scale if isinstance(scale, list) else [scale] * (len(shape) - 2)
        if any(int(n * f) == n and f != 1 for n, f in zip(shape[2:], sc)):
            cfg["torch_backward_inconsistent"] = True
    add("interp_%d_%s" % (i, mode), "interp", cfg, lambda x, kw=kw: F.interpolate(x, **kw), torch.randn(*shape))

# nn.Upsample (the same function, the layer's defaults: nearest).
add("upsample_default", "upsample", {"scale_factor": 2.0}, tnn.Upsample(scale_factor=2), torch.randn(1, 2, 3, 4))

# Pixel shuffle and unshuffle, with extra leading batch dimensions.
add("pixel_shuffle_2", "pixel_shuffle", {"r": 2}, lambda x: F.pixel_shuffle(x, 2), torch.randn(2, 8, 3, 4))
add("pixel_shuffle_3", "pixel_shuffle", {"r": 3}, lambda x: F.pixel_shuffle(x, 3), torch.randn(2, 1, 9, 2, 3))
add("pixel_unshuffle_2", "pixel_unshuffle", {"r": 2}, lambda x: F.pixel_unshuffle(x, 2), torch.randn(2, 3, 4, 6))
add("pixel_unshuffle_3", "pixel_unshuffle", {"r": 3}, lambda x: F.pixel_unshuffle(x, 3), torch.randn(1, 2, 6, 3))

# Unfold and fold (PyTorch 1.13: two spatial dimensions).
for i, (shape, k, d, p, st) in enumerate([((2, 3, 5, 6), (2, 3), (1, 2), (1, 0), (2, 1)),
                                          ((1, 2, 4, 4), (3, 3), (1, 1), (1, 1), (1, 1)),
                                          ((1, 1, 7, 5), (2, 2), (2, 1), (0, 2), (3, 2))]):
    cfg = {"kernel": list(k), "dilation": list(d), "padding": list(p), "stride": list(st)}
    add("unfold_%d" % i, "unfold", cfg, lambda x, k=k, d=d, p=p, st=st: F.unfold(x, k, dilation=d, padding=p, stride=st),
        torch.randn(*shape))
    cols = F.unfold(torch.zeros(*shape), k, dilation=d, padding=p, stride=st)
    add("fold_%d" % i, "fold", dict(cfg, size=list(shape[2:])),
        lambda x, s=shape[2:], k=k, d=d, p=p, st=st: F.fold(x, s, k, dilation=d, padding=p, stride=st), torch.randn(*cols.shape))

out = write("torch_spatial.json", cases)
print("wrote %d cases to %s" % (len(cases), out))
