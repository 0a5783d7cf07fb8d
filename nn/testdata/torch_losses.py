#!/usr/bin/python3
"""Writes torch_losses.json: reference values of losses for nn's tests.

Run from this directory with Debian's PyTorch (python3-torch, 1.13):

    /usr/bin/python3 torch_losses.py

Inputs are float32 values (written out, so the Go test uses the same ones);
the references are computed in float64: with torch.nn.functional where it has
the loss (huber_loss, kl_div, cosine_similarity, ctc_loss, and autograd for
the gradients of ctc_loss), and with the plain textbook formula otherwise
(log-cosh, hinge, sigmoid focal loss as torchvision.ops writes it, label
smoothing). CI reads the JSON and needs no torch.
"""

import json
import math

import numpy as np
import torch
import torch.nn.functional as F


def wave(n, seed, amp=1.0):
    v = [amp * math.sin(0.9 * i + 1.7 * seed) * (0.5 + 0.25 * (i % 3)) for i in range(n)]
    return np.asarray(v, dtype=np.float32).astype(np.float64)


def t64(x):
    return torch.tensor(x, dtype=torch.float64)


def out(x):
    return np.asarray(x, dtype=np.float64).ravel().tolist()


def regression():
    p = wave(12, 0.2, 3.0).reshape(3, 4)
    y = wave(12, 1.3, 3.0).reshape(3, 4)
    e = p - y
    return {
        "p": out(p), "y": out(y),
        "huber": out(F.huber_loss(t64(p), t64(y), reduction="none", delta=1.0)),
        "huber_delta": out(F.huber_loss(t64(p), t64(y), reduction="none", delta=0.7)),
        "log_cosh": out(np.log(np.cosh(e))),
        "squared": out(e * e),
    }


def kl():
    logits = wave(12, 0.4, 2.0).reshape(3, 4)
    logp = F.log_softmax(t64(logits), dim=-1).numpy()
    q = F.softmax(t64(wave(12, 2.2, 2.0).reshape(3, 4)), dim=-1).numpy()
    q[1, 2] = 0.0  # a zero target probability: its term is 0
    q[1] /= q[1].sum()
    logq = np.log(np.where(q > 0, q, 1.0))
    return {
        "logp": out(logp), "q": out(q),
        "kl": out(F.kl_div(t64(logp), t64(q), reduction="none").sum(-1)),
        "kl_log": out(F.kl_div(t64(logp), t64(logq), reduction="none", log_target=True).sum(-1)),
        "logq": out(logq),
    }


def cosine():
    a = wave(12, 0.6).reshape(3, 4)
    b = wave(12, 3.1).reshape(3, 4)
    return {"a": out(a), "b": out(b), "cos": out(F.cosine_similarity(t64(a), t64(b), dim=-1, eps=1e-12))}


def classification():
    x = wave(12, 0.9, 4.0).reshape(3, 4)
    y = (wave(12, 2.5) > 0).astype(np.float64).reshape(3, 4)
    s = np.where(y > 0, 1.0, -1.0)
    p = 1 / (1 + np.exp(-x))
    ce = -(y * np.log(p) + (1 - y) * np.log(1 - p))
    pt = p * y + (1 - p) * (1 - y)
    focal = ce * (1 - pt) ** 2
    focal3 = ce * (1 - pt) ** 3
    a = 0.25
    return {
        "x": out(x), "y": out(y), "signs": out(s),
        "hinge": out(np.maximum(0, 1 - x * s)),
        "focal": out(focal),
        "focal_alpha": out((a * y + (1 - a) * (1 - y)) * focal3),
        "smooth": out((1 - 0.1) * y + 0.1 / 4),
    }


def ctc():
    B, T, K, N = 3, 7, 5, 3
    logits = wave(B * T * K, 0.35, 3.0).reshape(B, T, K)
    labels = np.array([[1, 2, 2], [3, 1, 0], [4, 4, 4]], dtype=np.int64)
    label_lens = np.array([3, 2, 1])
    input_lens = np.array([7, 6, 4])
    lg = t64(logits).requires_grad_(True)
    logp = F.log_softmax(lg, dim=-1).transpose(0, 1)  # [T, B, K]
    loss = F.ctc_loss(logp, torch.tensor(labels), torch.tensor(input_lens), torch.tensor(label_lens),
                      blank=0, reduction="none", zero_infinity=False)
    loss.sum().backward()
    logit_pad = (np.arange(T)[None, :] >= input_lens[:, None]).astype(np.float64)
    label_pad = (np.arange(N)[None, :] >= label_lens[:, None]).astype(np.float64)
    return {
        "shape": [B, T, K, N],
        "logits": out(logits), "labels": labels.ravel().tolist(),
        "logit_paddings": out(logit_pad), "label_paddings": out(label_pad),
        "loss": out(loss.detach()), "grad": out(lg.grad),
    }


def main():
    res = {"torch": torch.__version__, "regression": regression(), "kl": kl(), "cosine": cosine(),
           "classification": classification(), "ctc": ctc()}
    with open("torch_losses.json", "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
