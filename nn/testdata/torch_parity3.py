#!/usr/bin/python3
"""Writes torch_parity3.json: PyTorch 1.13's outputs and gradients, in
float64, for the parts of nn that torch_layers.py leaves out or checks only
to float32 rounding (torch_parity3_test.go reads it, at 1e-12):

- the activations with a parameter or constant (LeakyReluWith, EluWith,
  Selu, CeluWith), and RMSNorm, LayerNorm and GroupNorm with eps near the
  inputs' mean square, where a float32 constant is ~1e-8 relative off. celu is
  written by its formula (autograd): torch's own celu backward rounds
  1/alpha to float32;
- Softmin, Hardshrink, Softshrink, Tanhshrink and Threshold;
- Embedding with padding_idx (the row's gradient is zero) and with
  max_norm (the looked-up rows renormalised; the gradient that of the
  plain lookup), and the weight after one SGD step, for the rows torch
  renormalised in place;
- F.cross_entropy with probability targets (weight, label_smoothing,
  reduction) on [N, C] and [N, C, T] (gonox's [N, T, C]), with the
  gradients of the logits and of the targets; F.nll_loss (ignore_index,
  weight, reduction);
- the optax-style losses of losses.go in float64: mse_loss, huber_loss,
  smooth_l1_loss, log(cosh), kl_div (with and without log_target),
  torchvision's sigmoid_focal_loss (gamma 0.7, alpha 0.3), label
  smoothing, cosine_similarity;
- margin_ranking_loss, triplet_margin_loss (p, swap), poisson_nll_loss
  (log_input, full), gaussian_nll_loss (full, the three shapes of var),
  multi_margin_loss (p, margin, weight), pairwise_distance (p).

Inputs are written with 17 significant digits, so the Go side reads the
float64 values torch computed with. Run with Debian's python3-torch
(PyTorch 1.13) from the repository root:

    /usr/bin/python3 nn/testdata/torch_parity3.py

and commit the JSON: CI does not need torch.
"""
import math, os
import torch
import torch.nn.functional as F

import sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ in nn/testdata
from torchcase import Cases, param, t, write  # noqa: E402

torch.manual_seed(73)
torch.set_default_dtype(torch.float64)
cases = Cases()
add = cases.add


# 1. Activations with float64 parameters, away from the kinks.
xa = torch.randn(3, 5) * 2
xa = torch.where(xa.abs() < 1e-2, xa + 0.1, xa)
acts = {
    "LeakyRelu": lambda x: F.leaky_relu(x),
    "LeakyRelu0.2": lambda x: F.leaky_relu(x, 0.2),
    "Elu0.3": lambda x: F.elu(x, 0.3),
    "Selu": F.selu,
    # torch's celu backward uses 1/alpha rounded to float32: its formula.
    "Celu0.7": lambda x: torch.where(x > 0, x, 0.7 * torch.expm1(x / 0.7)),
    "Celu": lambda x: torch.where(x > 0, x, torch.expm1(x)),
}
for n, f in acts.items():
    add("act_" + n, "act", {"act": n}, f, [xa])

# RMSNorm (torch 1.13 has none: PyTorch 2.4's formula) with mean squares
# near eps, where eps's float32 rounding shows.
xr = torch.randn(3, 4) * 3e-3
wr = param(torch.randn(4))
add("rmsnorm_eps", "rmsnorm", {"eps": 1e-5},
    lambda x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * wr, [xr], {"weight": wr})
xr2 = torch.randn(2, 6) * 1e-2
add("rmsnorm_eps3e-5", "rmsnorm", {"eps": 3e-5},
    lambda x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 3e-5), [xr2])

# LayerNorm (torch's own, float64 throughout) with variances near eps.
xl = torch.randn(3, 5) * 4e-3
wl, bl = param(torch.randn(5)), param(torch.randn(5))
add("layernorm_eps", "layernorm", {"eps": 1e-5}, lambda x: F.layer_norm(x, (5,), wl, bl, eps=1e-5), [xl],
    {"weight": wl, "bias": bl})
add("layernorm_eps_bare", "layernorm", {"eps": 2e-5}, lambda x: F.layer_norm(x, (4,), eps=2e-5), [torch.randn(2, 4) * 5e-3])

# GroupNorm likewise.
xg = torch.randn(2, 4, 3) * 3e-3
wg, bg = param(torch.randn(4)), param(torch.randn(4))
add("groupnorm_eps", "groupnorm", {"eps": 1e-5, "groups": 2, "channels": 4},
    lambda x: F.group_norm(x, 2, wg, bg, eps=1e-5), [xg], {"weight": wg, "bias": bg})

# 5. The small activations: away from their kinks.
xs = torch.randn(3, 6) * 1.5
for kink in (0.5, -0.5, 0.3, -0.3, 0.2):
    xs = torch.where((xs - kink).abs() < 2e-2, xs + 0.05, xs)
small = {
    "Softmin": (lambda x: F.softmin(x, dim=-1), {}),
    "Softmin0": (lambda x: F.softmin(x, dim=0), {"axis": 0}),
    "HardShrink": (F.hardshrink, {}),
    "HardShrink0.3": (lambda x: F.hardshrink(x, 0.3), {"lambda": 0.3}),
    "SoftShrink": (F.softshrink, {}),
    "SoftShrink0.3": (lambda x: F.softshrink(x, 0.3), {"lambda": 0.3}),
    "TanhShrink": (F.tanhshrink, {}),
    "Threshold": (lambda x: F.threshold(x, 0.2, -1.5), {"threshold": 0.2, "value": -1.5}),
}
for n, (f, cfg) in small.items():
    cfg = dict(cfg, act=n)
    add("act_" + n, "act", cfg, f, [xs])

# 2. Embedding: padding_idx and max_norm.
ids = torch.tensor([[1, 3, 0, 3], [2, 1, 1, 4]])
for pad in (3, -2):
    e = torch.nn.Embedding(6, 3, padding_idx=pad)  # row 5 is never looked up
    w0 = e.weight.detach().clone()
    with torch.no_grad():  # a nonzero padding row: its output is the row, its gradient zero
        e.weight[pad] = torch.randn(3)
    w = param(e.weight)
    add("embedding_pad%d" % pad, "embedding", {"padding_idx": pad, "init_row_zero": bool((w0[pad] == 0).all())},
        lambda x: F.embedding(x, w, padding_idx=pad), [ids], {"weight": w})
for maxnorm, p in ((1.5, 2.0), (0.8, 1.0), (1.2, 3.0), (1.0, float("inf"))):
    w = param(torch.randn(6, 3) * 1.2)  # row 5 is never looked up: torch leaves it
    w_before = w.detach().clone()
    name = "embedding_maxnorm%g_p%g" % (maxnorm, p)
    add(name, "embedding", {"max_norm": maxnorm, "norm_type": p if p != float("inf") else "inf"},
        lambda x: F.embedding(x, w, max_norm=maxnorm, norm_type=p), [ids], {"weight": w})
    cases[-1]["tensors"]["weight"] = t(w_before)
    # The weight torch renormalised in place, and after an SGD step.
    cases[-1]["tensors"]["renormed"] = t(w)
    cases[-1]["tensors"]["stepped"] = t(w - 0.1 * w.grad)

# 3. cross_entropy with probability targets; nll_loss.
def soft(shape):
    return torch.softmax(torch.randn(*shape) * 2, dim=1)


for name, shape, kw in [
    ("xent_probs", (4, 5), {}),
    ("xent_probs_sum", (4, 5), {"reduction": "sum"}),
    ("xent_probs_none", (4, 5), {"reduction": "none"}),
    ("xent_probs_weight", (4, 5), {"weight": True}),
    ("xent_probs_smooth", (4, 5), {"label_smoothing": 0.2}),
    ("xent_probs_weight_smooth", (4, 5), {"weight": True, "label_smoothing": 0.15}),
    ("xent_probs_weight_smooth_none", (4, 5), {"weight": True, "label_smoothing": 0.3, "reduction": "none"}),
    ("xent_probs_3d", (2, 4, 3), {"weight": True, "label_smoothing": 0.1}),
    ("xent_probs_3d_none", (2, 4, 3), {"reduction": "none"}),
    ("xent_probs_unnormalised", (3, 4), {"weight": True, "unnormalised": True}),
]:
    x = torch.randn(*shape) * 2
    tgt = soft(shape) if not kw.get("unnormalised") else torch.rand(*shape) * 2
    w = torch.rand(shape[1]) + 0.5 if kw.get("weight") else None
    red = kw.get("reduction", "mean")
    ls = kw.get("label_smoothing", 0.0)
    perm = {"x": (0, 2, 1), "x2": (0, 2, 1)} if len(shape) == 3 else None
    params = {"weight": param(w)} if w is not None else {}
    wp = params.get("weight")
    add(name, "xent_probs", {"reduction": red, "label_smoothing": ls},
        lambda x, y: F.cross_entropy(x, y, weight=wp, reduction=red, label_smoothing=ls), [x, tgt], params, perm=perm)

for name, shape, kw in [
    ("nll", (5, 4), {}),
    ("nll_sum", (5, 4), {"reduction": "sum"}),
    ("nll_none_weight", (5, 4), {"reduction": "none", "weight": True}),
    ("nll_ignore_weight", (6, 4), {"ignore_index": 2, "weight": True}),
    ("nll_ignore_default", (6, 4), {"ignore_index": -100}),
    ("nll_3d", (2, 4, 3), {"weight": True, "ignore_index": 1}),
]:
    logp = torch.log_softmax(torch.randn(*shape), dim=1)
    n = shape[0] if len(shape) == 2 else shape[0] * shape[2]
    lab = torch.randint(0, shape[1], (shape[0],) if len(shape) == 2 else (shape[0], shape[2]))
    if kw.get("ignore_index") == -100:
        lab.view(-1)[1] = -100
        lab.view(-1)[4] = -100
    w = torch.rand(shape[1]) + 0.5 if kw.get("weight") else None
    params = {"weight": w} if w is not None else {}  # not differentiable in torch
    wp = params.get("weight")
    red = kw.get("reduction", "mean")
    ign = kw.get("ignore_index", -100)
    perm = {"x": (0, 2, 1)} if len(shape) == 3 else None
    add(name, "nll", {"reduction": red, "ignore_index": ign if "ignore_index" in kw else None},
        lambda x, y: F.nll_loss(x, y, weight=wp, ignore_index=ign, reduction=red), [logp, lab], params, perm=perm)

# 5. The losses.
def focal(x, y, gamma, alpha=None):
    """torchvision.ops.sigmoid_focal_loss (reduction "none"), by autograd."""
    p = torch.sigmoid(x)
    ce = F.binary_cross_entropy_with_logits(x, y, reduction="none")
    p_t = p * y + (1 - p) * (1 - y)
    loss = ce * (1 - p_t) ** gamma
    if alpha is not None:
        loss = (alpha * y + (1 - alpha) * (1 - y)) * loss
    return loss


x1, x2 = torch.randn(6), torch.randn(6)
ysign = torch.tensor([1.0, -1, 1, -1, -1, 1])
for red in ("mean", "sum", "none"):
    add("margin_ranking_" + red, "margin_ranking", {"margin": 0.3, "reduction": red},
        lambda a, b, y: F.margin_ranking_loss(a, b, y, margin=0.3, reduction=red), [x1, x2, ysign])

a, pos, neg = torch.randn(5, 4), torch.randn(5, 4), torch.randn(5, 4)
for name, kw in [("triplet", {}), ("triplet_p1_swap_sum", {"p": 1.0, "swap": True, "reduction": "sum"}),
                 ("triplet_p3_margin0.5_none", {"p": 3.0, "margin": 0.5, "reduction": "none"}),
                 ("triplet_eps1e-3_swap", {"eps": 1e-3, "swap": True, "margin": 2.0})]:
    kw2 = dict(margin=kw.get("margin", 1.0), p=kw.get("p", 2.0), eps=kw.get("eps", 1e-6),
               swap=kw.get("swap", False), reduction=kw.get("reduction", "mean"))
    add(name, "triplet", kw2, lambda a, p_, n_: F.triplet_margin_loss(a, p_, n_, **kw2), [a, pos, neg])

rate_in = torch.randn(3, 4)
counts = torch.poisson(torch.rand(3, 4) * 4)
for name, kw in [("poisson", {}), ("poisson_full_sum", {"full": True, "reduction": "sum"}),
                 ("poisson_rate_none", {"log_input": False, "reduction": "none"}),
                 ("poisson_rate_full_eps", {"log_input": False, "full": True, "eps": 1e-3})]:
    kw2 = dict(log_input=kw.get("log_input", True), full=kw.get("full", False), eps=kw.get("eps", 1e-8),
               reduction=kw.get("reduction", "mean"))
    inp = rate_in if kw2["log_input"] else rate_in.abs() + 0.1
    inp = torch.where(inp == 0, inp + 0.1, inp)
    add(name, "poisson", kw2, lambda x, y: F.poisson_nll_loss(x, y, **kw2), [inp, counts])
# poisson's target gets no gradient in torch: keep it out.
for c in cases:
    if c["kind"] == "poisson":
        c["tensors"].pop("dx2", None)

mu, obs = torch.randn(4, 3), torch.randn(4, 3)
for name, vshape, kw in [("gaussian", (4, 3), {}), ("gaussian_full_sum", (4, 3), {"full": True, "reduction": "sum"}),
                         ("gaussian_var_n1_none", (4, 1), {"reduction": "none"}),
                         ("gaussian_var_n", (4,), {"full": True}),
                         ("gaussian_clamped", (4, 3), {"eps": 0.05})]:
    var = torch.rand(*vshape) + 0.02
    kw2 = dict(full=kw.get("full", False), eps=kw.get("eps", 1e-6), reduction=kw.get("reduction", "mean"))
    add(name, "gaussian", kw2, lambda x, y, v: F.gaussian_nll_loss(x, y, v, **kw2), [mu, obs, var])

xm = torch.randn(5, 4)
ym = torch.tensor([0, 3, 1, 1, 2])
for name, kw in [("multi_margin", {}), ("multi_margin_p2_margin0.5_sum", {"p": 2, "margin": 0.5, "reduction": "sum"}),
                 ("multi_margin_weight_none", {"weight": True, "reduction": "none"}),
                 ("multi_margin_weight_p2", {"weight": True, "p": 2, "margin": 1.5})]:
    w = torch.rand(4) + 0.5 if kw.get("weight") else None
    params = {"weight": w} if w is not None else {}  # not differentiable in torch
    wp = params.get("weight")
    kw2 = dict(p=kw.get("p", 1), margin=kw.get("margin", 1.0), reduction=kw.get("reduction", "mean"))
    add(name, "multi_margin", kw2, lambda x, y: F.multi_margin_loss(x, y, weight=wp, **kw2), [xm, ym], params)

# The optax-style losses of losses.go in float64 (per element or per row,
# unreduced), against torch's functions or their formulas by autograd:
# the constants (Huber's delta, log 2, the focal loss's gamma and alpha,
# the smoothing) must be float64 ones.
pr, tg = torch.randn(3, 4) * 1.5, torch.randn(3, 4)
probs_t = torch.softmax(torch.randn(3, 4), -1)
logp = torch.log_softmax(torch.randn(3, 4), -1)
yb = (torch.rand(3, 4) > 0.5).double()
optax_losses = [
    ("squared_error", {}, lambda x, y: F.mse_loss(x, y, reduction="none"), [pr, tg]),
    ("l2", {}, lambda x, y: 0.5 * F.mse_loss(x, y, reduction="none"), [pr, tg]),
    ("huber0.7", {"delta": 0.7}, lambda x, y: F.huber_loss(x, y, reduction="none", delta=0.7), [pr, tg]),
    ("smooth_l1_0.3", {"delta": 0.3}, lambda x, y: F.smooth_l1_loss(x, y, reduction="none", beta=0.3), [pr, tg]),
    ("log_cosh", {}, lambda x, y: torch.log(torch.cosh(x - y)), [pr, tg]),
    ("kl_div", {}, lambda x, y: F.kl_div(x, y, reduction="none").sum(-1), [logp, probs_t]),
    ("kl_div_log_target", {}, lambda x, y: F.kl_div(x, y, reduction="none", log_target=True).sum(-1),
     [logp, torch.log_softmax(torch.randn(3, 4), -1)]),
    ("focal0.7_0.3", {"gamma": 0.7, "alpha": 0.3}, lambda x: focal(x, yb, 0.7, 0.3), [pr * 1.3]),
    ("smooth_labels0.15", {"alpha": 0.15}, lambda y: y * 0.85 + 0.15 / 4, [probs_t]),
    ("cosine_similarity", {"eps": 1e-12}, lambda x, y: F.cosine_similarity(x, y, dim=-1, eps=1e-12), [pr, tg]),
]
for n, cfg, f, ins in optax_losses:
    add("optax_" + n, "optax_loss", dict(cfg, loss=n), f, ins)
    if n.startswith("focal"):
        cases[-1]["tensors"]["labels"] = t(yb)

pa, pb = torch.randn(3, 5), torch.randn(3, 5)
for name, p, eps in [("pairwise", 2.0, 1e-6), ("pairwise_p1", 1.0, 1e-6), ("pairwise_p3_eps0.1", 3.0, 0.1),
                     ("pairwise_pinf", float("inf"), 1e-6)]:
    add(name, "pairwise", {"p": p if p != float("inf") else "inf", "eps": eps},
        lambda u, v: F.pairwise_distance(u, v, p=p, eps=eps), [pa, pb])

write("torch_parity3.json", cases, separators=(",", ":"), allow_nan=False)
print(len(cases), "cases")
