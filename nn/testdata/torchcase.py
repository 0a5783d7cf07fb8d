"""Helpers shared by the PyTorch reference scripts of nn/testdata: the
tensor serialiser t, the case recorder (Cases.add, param) and the JSON
writer. A script imports them with

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.dont_write_bytecode = True
    from torchcase import Cases, param, t, write

so that it runs from the repository root (``/usr/bin/python3
nn/testdata/torch_layers.py``) as from nn/testdata. It writes no file
itself.
"""
import json
import os

import torch


def t(x, digits=17):
    """Returns x as {"shape", "data"}: its elements flattened in row-major
    order as floats, with digits significant digits (17 round-trips a
    float64; integer and boolean tensors give their values as floats)."""
    x = x.detach()
    if not x.dtype.is_floating_point:
        return {"shape": list(x.shape), "data": [float(i) for i in x.flatten().tolist()]}
    fmt = "%%.%dg" % digits
    return {"shape": list(x.shape), "data": [float(fmt % v) for v in x.double().flatten().tolist()]}


def write(name, cases, newline=True, **dump):
    """Writes {"torch": version, "cases": cases} to nn/testdata/name with
    json.dump's options dump (compact separators unless given), a final
    newline unless newline is False, and returns the path."""
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
    if "indent" not in dump:
        dump.setdefault("separators", (",", ":"))
    with open(out, "w") as f:
        json.dump({"torch": torch.__version__, "cases": cases}, f, **dump)
        if newline:
            f.write("\n")
    return out


class Cases(list):
    """The cases of a script's JSON file, with add recording one. With
    scalar_one (the default) a scalar y is backpropagated with cotangent 1;
    without it, with a random one like any other y (torch_layers.py's
    choice, kept so its file does not change)."""

    def __init__(self, scalar_one=True):
        super().__init__()
        self.scalar_one = scalar_one

    def add(self, name, kind, config, fn, inputs, params=None, const=(), perm=None):
        """Runs y = fn(*inputs), backpropagates a random cotangent g, and
        records the inputs (x, x2, ...), the parameters (a dict of leaf
        tensors), y, g and the gradients (dx, dx2, ..., d<param>); the
        inputs at the indices const take no gradient. perm, if given,
        permutes every recorded tensor of the names it lists (torch's class
        axis 1 to gonox's last)."""
        params = params or {}
        names = ["x"] + ["x%d" % (i + 2) for i in range(len(inputs) - 1)]
        ins = []
        for i, v in enumerate(inputs):
            if v.dtype.is_floating_point and i not in const:
                v = v.detach().clone().requires_grad_(True)
            ins.append(v)
        tensors = {n: t(v) for n, v in zip(names, ins)}
        tensors.update({n: t(p) for n, p in params.items()})
        y = fn(*ins)
        g = torch.tensor(1.0) if self.scalar_one and y.dim() == 0 else torch.randn_like(y)
        y.backward(g)
        tensors.update({"y": t(y), "g": t(g)})
        for n, v in zip(names, ins):
            if v.dtype.is_floating_point and v.grad is not None:
                tensors["d" + n] = t(v.grad)
        for n, p in params.items():
            if p.grad is not None:
                tensors["d" + n] = t(p.grad)
        for n, p in (perm or {}).items():
            for k in (n, "d" + n):
                if k in tensors:
                    v = torch.tensor(tensors[k]["data"]).reshape(tensors[k]["shape"]).permute(*p)
                    tensors[k] = t(v.contiguous())
        self.append({"name": name, "kind": kind, "config": config, "tensors": tensors})


def param(x):
    """Returns a leaf copy of x that requires its gradient."""
    return x.detach().clone().requires_grad_(True)
