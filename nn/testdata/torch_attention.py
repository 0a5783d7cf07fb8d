#!/usr/bin/python3
"""Writes torch_attention.json: PyTorch's outputs and gradients for
torch.nn.MultiheadAttention (batch_first, with biases, with and without a
causal mask), torch.nn.LayerNorm and cross-entropy on integer labels, on
fixed random inputs and weights, computed in float64. nn's
torch_attention_test.go builds nn.MultiHeadAttention, nn.LayerNorm and
tensor.SoftmaxCrossEntropy from the same weights (transposed to gonox's
[in, out] layout) and compares. Run with Debian's python3-torch (PyTorch
1.13):

    /usr/bin/python3 nn/testdata/torch_attention.py

and commit the JSON: CI does not need torch.
"""
import os
import torch
import torch.nn.functional as F

import sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ in nn/testdata
from torchcase import write  # noqa: E402
import torchcase  # noqa: E402


def t(x):
    return torchcase.t(x, digits=12)


torch.manual_seed(43)
torch.set_default_dtype(torch.float64)
cases = []


def mha(name, causal):
    E, heads, B, T = 8, 2, 2, 5
    m = torch.nn.MultiheadAttention(E, heads, bias=True, batch_first=True)
    with torch.no_grad():  # biases are zero at init: make them count
        m.in_proj_bias.normal_()
        m.out_proj.bias.normal_()
    x = torch.randn(B, T, E, requires_grad=True)
    mask = None
    if causal:
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)  # True: hidden
    y, _ = m(x, x, x, attn_mask=mask, need_weights=False)
    g = torch.randn_like(y)
    y.backward(g)
    w, b = m.in_proj_weight, m.in_proj_bias
    tensors = {"x": t(x), "y": t(y), "g": t(g), "dx": t(x.grad),
               "wq": t(w[:E]), "wk": t(w[E:2 * E]), "wv": t(w[2 * E:]),
               "bq": t(b[:E]), "bk": t(b[E:2 * E]), "bv": t(b[2 * E:]),
               "wo": t(m.out_proj.weight), "bo": t(m.out_proj.bias),
               "dwq": t(w.grad[:E]), "dwk": t(w.grad[E:2 * E]), "dwv": t(w.grad[2 * E:]),
               "dbq": t(b.grad[:E]), "dbk": t(b.grad[E:2 * E]), "dbv": t(b.grad[2 * E:]),
               "dwo": t(m.out_proj.weight.grad), "dbo": t(m.out_proj.bias.grad)}
    cases.append({"name": name, "kind": "mha", "config": {"heads": heads, "causal": causal}, "tensors": tensors})


def layernorm():
    m = torch.nn.LayerNorm(8, eps=1e-5)
    with torch.no_grad():
        m.weight.normal_()
        m.bias.normal_()
    x = torch.randn(2, 5, 8, requires_grad=True) * 3 + 1
    x.retain_grad()
    y = m(x)
    g = torch.randn_like(y)
    y.backward(g)
    cases.append({"name": "layernorm", "kind": "layernorm", "config": {},
                  "tensors": {"x": t(x), "y": t(y), "g": t(g), "dx": t(x.grad), "w": t(m.weight), "b": t(m.bias),
                              "dw": t(m.weight.grad), "db": t(m.bias.grad)}})


def cross_entropy():
    logits = (torch.randn(6, 5) * 4).requires_grad_()
    labels = torch.tensor([0, 4, 2, 2, 1, 3])
    y = F.cross_entropy(logits, labels, reduction="none")
    g = torch.randn_like(y)
    y.backward(g)
    cases.append({"name": "cross_entropy", "kind": "cross_entropy", "config": {"labels": labels.tolist()},
                  "tensors": {"x": t(logits), "y": t(y), "g": t(g), "dx": t(logits.grad)}})


mha("mha", False)
mha("mha_causal", True)
layernorm()
cross_entropy()
out = write("torch_attention.json", cases, indent=0)
