#!/usr/bin/python3
"""Writes torch_rnnseq.json: PyTorch's sequence layers torch.nn.LSTM,
torch.nn.GRU and torch.nn.RNN (tanh and relu) for nn's LSTM, GRU and RNN
(rnn_seq_test.go reads it; torch_rnn.py covers the cells).

Each case runs one layer (1 or 2 layers, one or two directions,
batch_first or time-first, with or without biases, LSTM with and without
proj_size) on a sequence x, from initial states h0 (and c0) that are given
or left out (zeros), on full sequences or on variable lengths
(pack_padded_sequence with enforce_sorted=False, then pad_packed_sequence
with total_length=T, so padded outputs are zero and h_n is the state at
each sequence's last element), and on an unbatched sequence [T, in]. The
loss is sum(y*g) + sum(h_n*gh) (+ sum(c_n*gc)) for random cotangents; the
file holds the inputs, the parameters under PyTorch's names and in its
layout (weight_ih_l{k}{_reverse} [gates*hidden, in], ...), the outputs and
the gradients of every input and parameter ("d" + name).

Everything is float64, written with 17 significant digits so that the Go
side reads exactly the values torch computed with. Run with Debian's
python3-torch (PyTorch 1.13) from the repository root:

    /usr/bin/python3 nn/testdata/torch_rnnseq.py

and commit the JSON: CI does not need torch.

With --bench it writes nothing and times instead the step of nn's
BenchmarkRecurrent (forward and backward of sum(y*y), float32, [T=50,
batch=32, in=64], hidden 128) in wall and CPU time, for docs/performance.md:

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 /usr/bin/python3 nn/testdata/torch_rnnseq.py --bench
"""
import os
import sys
import time

import torch
import torch.nn as tnn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ in nn/testdata
from torchcase import t, write  # noqa: E402


def bench():
    torch.set_num_threads(1)
    x = torch.randn(50, 32, 64)
    for cls in [tnn.LSTM, tnn.GRU, tnn.RNN]:
        for layers, bi in [(1, False), (2, True)]:
            m = cls(64, 128, num_layers=layers, bidirectional=bi)

            def step():
                m.zero_grad()
                y, _ = m(x)
                (y * y).sum().backward()
            for _ in range(2):
                step()
            n = 10
            c0, w0 = time.process_time(), time.perf_counter()
            for _ in range(n):
                step()
            print("torch %s/layers=%d/bidirectional=%s %.2f cpu-ms/step %.2f ms/step" % (
                cls.__name__, layers, str(bi).lower(), (time.process_time() - c0) / n * 1e3,
                (time.perf_counter() - w0) / n * 1e3))


if "--bench" in sys.argv:
    bench()
    sys.exit(0)

torch.manual_seed(61)
torch.set_default_dtype(torch.float64)
IN, HIDDEN, T, B = 2, 3, 4, 3
cases = []


def add(kind, layers=1, bidirectional=False, batch_first=False, bias=True, h0=False, lengths=None,
        nonlinearity="tanh", proj=0, unbatched=False):
    name = "%s_l%d%s%s%s%s%s%s%s" % (
        kind if kind != "rnn" else "rnn_" + nonlinearity, layers, "_bi" if bidirectional else "",
        "_bf" if batch_first else "", "" if bias else "_nobias", "_h0" if h0 else "",
        "_len" if lengths else "", "_proj%d" % proj if proj else "", "_unbatched" if unbatched else "")
    kw = dict(num_layers=layers, bidirectional=bidirectional, batch_first=batch_first, bias=bias)
    if kind == "lstm":
        m = tnn.LSTM(IN, HIDDEN, proj_size=proj, **kw)
    elif kind == "gru":
        m = tnn.GRU(IN, HIDDEN, **kw)
    else:
        m = tnn.RNN(IN, HIDDEN, nonlinearity=nonlinearity, **kw)
    D = 2 if bidirectional else 1
    hout = proj or HIDDEN
    if unbatched:
        x = torch.randn(T, IN)
        hshape, cshape = (layers * D, hout), (layers * D, HIDDEN)
    else:
        x = torch.randn(B, T, IN) if batch_first else torch.randn(T, B, IN)
        hshape, cshape = (layers * D, B, hout), (layers * D, B, HIDDEN)
    x.requires_grad_(True)
    tensors = {"x": t(x)}
    state = None
    if h0:
        hh = torch.randn(*hshape).requires_grad_(True)
        tensors["h0"] = t(hh)
        state = hh
        if kind == "lstm":
            cc = torch.randn(*cshape).requires_grad_(True)
            tensors["c0"] = t(cc)
            state = (hh, cc)
    for n, p in m.named_parameters():
        tensors[n] = t(p)
    inp = x
    if lengths:
        inp = pack_padded_sequence(x, torch.tensor(lengths), batch_first=batch_first, enforce_sorted=False)
    y, st = m(inp, state)
    if lengths:
        y, _ = pad_packed_sequence(y, batch_first=batch_first, total_length=T)
    hn, cn = (st if kind == "lstm" else (st, None))
    g, gh = torch.randn_like(y), torch.randn_like(hn)
    loss = (y * g).sum() + (hn * gh).sum()
    tensors.update({"y": t(y), "hn": t(hn), "g": t(g), "gh": t(gh)})
    if cn is not None:
        gc = torch.randn_like(cn)
        loss = loss + (cn * gc).sum()
        tensors.update({"cn": t(cn), "gc": t(gc)})
    loss.backward()
    tensors["dx"] = t(x.grad)
    if h0:
        tensors["dh0"] = t(hh.grad)
        if kind == "lstm":
            tensors["dc0"] = t(cc.grad)
    for n, p in m.named_parameters():
        tensors["d" + n] = t(p.grad)
    config = {"in": IN, "hidden": HIDDEN, "layers": layers, "bidirectional": bidirectional,
              "batch_first": batch_first, "bias": bias, "h0": h0, "nonlinearity": nonlinearity, "proj": proj,
              "unbatched": unbatched}
    if lengths:
        config["lengths"] = lengths
    cases.append({"name": name, "kind": kind, "config": config, "tensors": tensors})


for kind, nl in [("lstm", "tanh"), ("gru", "tanh"), ("rnn", "tanh"), ("rnn", "relu")]:
    add(kind, nonlinearity=nl)
    add(kind, layers=2, bidirectional=True, batch_first=True, h0=True, nonlinearity=nl)
    add(kind, layers=2, bias=False, h0=True, nonlinearity=nl)
    add(kind, bidirectional=True, lengths=[4, 1, 3], nonlinearity=nl)
    add(kind, layers=2, bidirectional=True, batch_first=True, h0=True, lengths=[2, 4, 3], nonlinearity=nl)
    add(kind, layers=2, bidirectional=True, h0=True, unbatched=True, nonlinearity=nl)
add("lstm", layers=2, bidirectional=True, batch_first=True, h0=True, proj=2)
add("lstm", bidirectional=True, lengths=[3, 4, 1], proj=2)

write("torch_rnnseq.json", cases)
