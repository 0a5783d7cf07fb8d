#!/usr/bin/python3
"""Writes torch_conv.json: PyTorch's outputs and gradients for the layers of
nn's conv.go, pool.go and norm_batch.go (Conv1d/2d/3d, ConvTranspose1d/2d/3d,
MaxPool, AvgPool, adaptive pooling, BatchNorm in training and inference,
GroupNorm) on fixed random inputs and weights, computed in float64. The
tests in nn (torch_test.go) build the gonox layers from the same weights and
compare. Run with Debian's python3-torch (PyTorch 1.13):

    /usr/bin/python3 nn/testdata/torch_conv.py

and commit the JSON: CI does not need torch.
"""
import os
import torch
import torch.nn as tnn

import sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ in nn/testdata
from torchcase import write  # noqa: E402
import torchcase  # noqa: E402


def t(x):
    return torchcase.t(x, digits=10)


torch.manual_seed(29)
torch.set_default_dtype(torch.float64)
cases = []


def grads(mod, x, y):
    """Backpropagates a random cotangent g; returns g and the gradients."""
    g = torch.randn_like(y)
    y.backward(g)
    out = {"g": t(g), "dx": t(x.grad)}
    for name, p in mod.named_parameters():
        out["d" + name] = t(p.grad)
    return out


def add(name, kind, config, mod, x):
    x = x.clone().requires_grad_(True)
    tensors = {"x": t(x)}
    for pname, p in mod.named_parameters():
        tensors[pname] = t(p)
    for bname, b in mod.named_buffers():
        if b.dtype.is_floating_point:
            tensors[bname] = t(b)
    y = mod(x)
    tensors["y"] = t(y)
    tensors.update(grads(mod, x, y))
    if kind == "batchnorm":
        for bname, b in mod.named_buffers():
            if b.dtype.is_floating_point:
                tensors[bname + "_after"] = t(b)
    cases.append({"name": name, "kind": kind, "config": config, "tensors": tensors})


convs = [
    # name, dims, cin, cout, k, stride, padding, dilation, groups, bias, spatial
    ("conv2d", 2, 3, 4, 3, 1, 1, 1, 1, True, (7, 6)),
    ("conv2d_stride_dil", 2, 4, 6, (3, 2), (2, 1), (1, 2), (1, 2), 2, True, (9, 8)),
    ("conv2d_depthwise", 2, 4, 8, 3, 2, 0, 1, 4, False, (7, 7)),
    ("conv1d", 1, 3, 5, 4, 2, 2, 1, 1, True, (13,)),
    ("conv3d", 3, 2, 3, 3, (1, 2, 1), 1, 1, 1, True, (4, 5, 5)),
]
for name, nd, cin, cout, k, s, p, d, g, bias, sp in convs:
    cls = [None, tnn.Conv1d, tnn.Conv2d, tnn.Conv3d][nd]
    mod = cls(cin, cout, k, stride=s, padding=p, dilation=d, groups=g, bias=bias)
    cfg = dict(dims=nd, cin=cin, cout=cout, kernel=k, stride=s, padding=p, dilation=d, groups=g, bias=bias)
    add(name, "conv", cfg, mod, torch.randn(2, cin, *sp))

convts = [
    # name, dims, cin, cout, k, stride, padding, output_padding, dilation, groups, bias, spatial
    ("convtranspose2d", 2, 4, 3, 3, 2, 1, 1, 1, 1, True, (4, 5)),
    ("convtranspose2d_groups", 2, 4, 6, (2, 3), (1, 2), (0, 1), (0, 1), (2, 1), 2, False, (5, 4)),
    ("convtranspose1d", 1, 3, 2, 4, 3, 1, 2, 1, 1, True, (6,)),
    ("convtranspose3d", 3, 2, 3, 2, 2, 0, 0, 1, 1, True, (3, 2, 3)),
]
for name, nd, cin, cout, k, s, p, op, d, g, bias, sp in convts:
    cls = [None, tnn.ConvTranspose1d, tnn.ConvTranspose2d, tnn.ConvTranspose3d][nd]
    mod = cls(cin, cout, k, stride=s, padding=p, output_padding=op, dilation=d, groups=g, bias=bias)
    cfg = dict(dims=nd, cin=cin, cout=cout, kernel=k, stride=s, padding=p, output_padding=op, dilation=d, groups=g, bias=bias)
    add(name, "convtranspose", cfg, mod, torch.randn(2, cin, *sp))

pools = [
    ("maxpool2d", "maxpool", tnn.MaxPool2d(3, stride=2, padding=1), dict(kernel=3, stride=2, padding=1), (2, 3, 9, 8)),
    ("maxpool2d_dil", "maxpool", tnn.MaxPool2d((2, 3), stride=(1, 2), padding=(1, 1), dilation=(2, 1)), dict(kernel=[2, 3], stride=[1, 2], padding=[1, 1], dilation=[2, 1]), (2, 2, 7, 9)),
    ("maxpool1d", "maxpool", tnn.MaxPool1d(2), dict(kernel=2, stride=2, padding=0), (2, 3, 9)),
    ("maxpool3d", "maxpool", tnn.MaxPool3d(2, stride=1), dict(kernel=2, stride=1, padding=0), (1, 2, 3, 4, 4)),
    ("avgpool2d", "avgpool", tnn.AvgPool2d(3, stride=2, padding=1), dict(kernel=3, stride=2, padding=1, count_include_pad=True), (2, 3, 9, 8)),
    ("avgpool2d_nopad", "avgpool", tnn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False), dict(kernel=3, stride=2, padding=1, count_include_pad=False), (2, 3, 9, 8)),
    ("avgpool1d", "avgpool", tnn.AvgPool1d(3, stride=2), dict(kernel=3, stride=2, padding=0, count_include_pad=True), (2, 3, 10)),
    ("avgpool3d", "avgpool", tnn.AvgPool3d(2), dict(kernel=2, stride=2, padding=0, count_include_pad=True), (1, 2, 4, 4, 6)),
    ("adaptiveavg2d", "adaptiveavg", tnn.AdaptiveAvgPool2d((3, 2)), dict(output=[3, 2]), (2, 3, 7, 5)),
    ("adaptivemax2d", "adaptivemax", tnn.AdaptiveMaxPool2d((3, 4)), dict(output=[3, 4]), (2, 3, 7, 5)),
    ("adaptiveavg1d", "adaptiveavg", tnn.AdaptiveAvgPool1d(4), dict(output=[4]), (2, 3, 10)),
]
for name, kind, mod, cfg, shape in pools:
    add(name, kind, cfg, mod, torch.randn(*shape))

for mode in ["train", "eval"]:
    for nd in [1, 2, 3]:
        cls = [None, tnn.BatchNorm1d, tnn.BatchNorm2d, tnn.BatchNorm3d][nd]
        mod = cls(4, eps=1e-5, momentum=0.1)
        with torch.no_grad():
            mod.weight.copy_(torch.randn(4))
            mod.bias.copy_(torch.randn(4))
            mod.running_mean.copy_(torch.randn(4))
            mod.running_var.copy_(torch.rand(4) + 0.5)
        mod.train(mode == "train")
        shape = [(5, 4, 6), (3, 4, 5, 4), (2, 4, 3, 3, 2)][nd - 1]
        add("batchnorm%dd_%s" % (nd, mode), "batchnorm", dict(dims=nd, channels=4, eps=1e-5, momentum=0.1, mode=mode), mod, torch.randn(*shape) * 2 + 1)

for groups, shape in [(2, (3, 6, 5, 4)), (3, (2, 3, 7)), (1, (2, 4, 3, 2, 2))]:
    mod = tnn.GroupNorm(groups, shape[1], eps=1e-5)
    with torch.no_grad():
        mod.weight.copy_(torch.randn(shape[1]))
        mod.bias.copy_(torch.randn(shape[1]))
    add("groupnorm_g%d_%dd" % (groups, len(shape) - 2), "groupnorm", dict(groups=groups, channels=shape[1], eps=1e-5), mod, torch.randn(*shape))

out = write("torch_conv.json", cases)
print("wrote", out, len(cases), "cases")
