#!/usr/bin/python3
"""Writes torch_rnn.json: reference values of GRUCell and LSTMCell for nn's tests.

Run from this directory with Debian's PyTorch (python3-torch, 1.13):

    /usr/bin/python3 torch_rnn.py

torch.nn.GRUCell and torch.nn.LSTMCell are run for 5 steps on a batch of 2,
from float32 parameters and inputs (written out, so the Go test uses the same
ones), in float64. The loss is sum_t sum(w_t * h_t) for fixed weights w; the
file holds every step's hidden (and cell) state and the gradients of the loss
with respect to the parameters, the inputs and the initial state. The Go test
maps torch's parameters onto Equinox's (nn.GRUCell's doc says how) and
compares. CI reads the JSON and needs no torch.
"""

import json

import torch

IN, HIDDEN, BATCH, STEPS = 3, 4, 2, 5


def f32(*shape, scale=1.0):
    return (torch.randn(*shape) * scale).float().double()


def out(x):
    return x.detach().double().reshape(-1).tolist()


def run(kind):
    cls = torch.nn.GRUCell if kind == "gru" else torch.nn.LSTMCell
    cell = cls(IN, HIDDEN).double()
    with torch.no_grad():
        for p in cell.parameters():  # float32 values, as the Go side holds them
            p.copy_(p.float().double())
    xs = f32(STEPS, BATCH, IN).requires_grad_()
    h0 = f32(BATCH, HIDDEN, scale=0.5).requires_grad_()
    c0 = f32(BATCH, HIDDEN, scale=0.5).requires_grad_()
    w = f32(STEPS, BATCH, HIDDEN)
    h, c = h0, c0
    hs, cs = [], []
    loss = 0
    for t in range(STEPS):
        if kind == "gru":
            h = cell(xs[t], h)
        else:
            h, c = cell(xs[t], (h, c))
            cs.append(c)
        hs.append(h)
        loss = loss + (w[t] * h).sum()
    loss.backward()
    rec = {
        "weight_ih": out(cell.weight_ih), "weight_hh": out(cell.weight_hh),
        "bias_ih": out(cell.bias_ih), "bias_hh": out(cell.bias_hh),
        "xs": out(xs), "h0": out(h0), "w": out(w),
        "hs": out(torch.stack(hs)), "loss": loss.item(),
        "d_weight_ih": out(cell.weight_ih.grad), "d_weight_hh": out(cell.weight_hh.grad),
        "d_bias_ih": out(cell.bias_ih.grad), "d_bias_hh": out(cell.bias_hh.grad),
        "d_xs": out(xs.grad), "d_h0": out(h0.grad),
    }
    if kind == "lstm":
        rec.update({"c0": out(c0), "cs": out(torch.stack(cs)), "d_c0": out(c0.grad)})
    return rec


def main():
    torch.manual_seed(0)
    ref = {"torch": torch.__version__, "in": IN, "hidden": HIDDEN, "batch": BATCH, "steps": STEPS, "gru": run("gru"), "lstm": run("lstm")}
    with open("torch_rnn.json", "w") as f:
        json.dump(ref, f)
        f.write("\n")


if __name__ == "__main__":
    main()
