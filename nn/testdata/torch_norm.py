#!/usr/bin/python3
"""Writes torch_norm.json: PyTorch's outputs and gradients for nn.WeightNorm
and nn.SpectralNorm (weight_norm.go, spectral_norm.go) on fixed random
inputs and weights, computed in float64. The tests in nn (norm_wrap_test.go)
build the gonox layers from the same weights and compare. Run with Debian's
python3-torch (PyTorch 1.13):

    /usr/bin/python3 nn/testdata/torch_norm.py

and commit the JSON: CI does not need torch.

Weight normalisation uses torch.nn.utils.weight_norm (weight_g, weight_v);
spectral normalisation torch.nn.utils.parametrizations.spectral_norm, whose
_u and _v after PyTorch's own initialisation are written out so that the Go
side starts from the same vectors. A spectral-norm case runs three training
calls on different inputs (u and v advance by the power iterations of each)
and backpropagates a random cotangent through the last, then one call in
eval mode.
"""
import os
import torch
import torch.nn as tnn
from torch.nn.utils import parametrizations, weight_norm

import sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ in nn/testdata
from torchcase import write  # noqa: E402
import torchcase  # noqa: E402


def t(x):
    return torchcase.t(x, digits=10)


torch.manual_seed(32)
torch.set_default_dtype(torch.float64)
cases = []


def rounded(mod):
    # Parameters representable in float32 (after the %.10g rounding the Go
    # side reads them back with), so both sides hold the same weights.
    with torch.no_grad():
        for p in mod.parameters():
            p.copy_(p.float().double())


def layer(kind, cin, cout):
    if kind == "linear":
        return tnn.Linear(cin, cout)
    if kind == "conv2d":
        return tnn.Conv2d(cin, cout, 3, padding=1)
    return tnn.ConvTranspose2d(cin, cout, 3, stride=2)


def xshape(kind, cin):
    return (5, cin) if kind == "linear" else (2, cin, 5, 4)


for name, kind, cin, cout, dim in [
    ("wn_linear", "linear", 4, 3, 0),
    ("wn_linear_all", "linear", 4, 3, None),
    ("wn_conv2d", "conv2d", 3, 4, 0),
]:
    mod = layer(kind, cin, cout)
    rounded(mod)
    mod = weight_norm(mod, "weight", dim=dim)
    with torch.no_grad():  # move g away from ‖v‖, so that it matters
        mod.weight_g.mul_(1 + 0.5 * torch.rand_like(mod.weight_g))
    rounded(mod)
    x = (torch.randn(*xshape(kind, cin)) * 1.5).requires_grad_(True)
    tensors = {"x": t(x), "weight_g": t(mod.weight_g), "weight_v": t(mod.weight_v), "bias": t(mod.bias)}
    y = mod(x)
    g = torch.randn_like(y)
    y.backward(g)
    tensors.update({"y": t(y), "g": t(g), "dx": t(x.grad), "dweight_g": t(mod.weight_g.grad),
                    "dweight_v": t(mod.weight_v.grad), "dbias": t(mod.bias.grad)})
    cases.append({"name": name, "kind": "weightnorm_" + kind, "config": {"all_axes": dim is None}, "tensors": tensors})

for name, kind, cin, cout, iters in [
    ("sn_linear", "linear", 4, 6, 1),
    ("sn_linear_wide", "linear", 7, 3, 2),
    ("sn_conv2d", "conv2d", 3, 4, 2),
    ("sn_convtranspose2d", "convtranspose2d", 3, 2, 1),
]:
    mod = layer(kind, cin, cout)
    rounded(mod)
    mod = parametrizations.spectral_norm(mod, n_power_iterations=iters)
    p = mod.parametrizations.weight
    tensors = {"weight": t(p.original), "bias": t(mod.bias), "u0": t(p[0]._u), "v0": t(p[0]._v)}
    for step in range(3):
        x = (torch.randn(*xshape(kind, cin)) * 1.5).requires_grad_(True)
        y = mod(x)
        tensors.update({"x%d" % step: t(x), "y%d" % step: t(y), "u%d" % (step + 1): t(p[0]._u), "v%d" % (step + 1): t(p[0]._v)})
    g = torch.randn_like(y)
    y.backward(g)
    tensors.update({"g": t(g), "dx": t(x.grad), "dweight": t(p.original.grad), "dbias": t(mod.bias.grad)})
    mod.eval()
    x = torch.randn(*xshape(kind, cin))
    with torch.no_grad():
        tensors.update({"x_eval": t(x), "y_eval": t(mod(x))})
    cases.append({"name": name, "kind": "spectralnorm_" + kind, "config": {"iterations": iters}, "tensors": tensors})

out = write("torch_norm.json", cases)
print("wrote", out, len(cases), "cases")
