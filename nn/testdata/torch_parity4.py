#!/usr/bin/python3
"""Writes torch_parity4.json: PyTorch 1.13's outputs and gradients, in
float64, for torch_parity4_test.go (read at 1e-12 relative):

- BatchNorm1d/2d in training and evaluation with variances near eps and
  momentum 0.1, and the running statistics after the step: eps and
  momentum rounded to float32 are ~1e-8 relative off;
- SpectralNorm's power iteration (gonox's order, Equinox's: u from v,
  then v from u) written with F.normalize(eps), on a weight whose
  products have norms below eps, and the normalised weight;
- the losses of losses_parity4.go: hinge_embedding_loss,
  cosine_embedding_loss, soft_margin_loss, multilabel_margin_loss,
  multilabel_soft_margin_loss, binary_cross_entropy (weight, the log
  clamped at -100), kl_div with reduction 'batchmean';
- ctc_loss (reduction 'none') in float64, blank 0 and 3, with repeats and
  padded frames and labels, and the logits' gradient;
- embedding_bag: sum, mean and max with offsets (an empty bag),
  per_sample_weights, [B, L] indices, and the weight's gradient; then
  padding_idx, max_norm and norm_type (2, 1, inf; with the weight PyTorch
  renormalises in place) and include_last_offset.

Inputs are written with 17 significant digits. Run with Debian's
python3-torch (PyTorch 1.13) from the repository root:

    /usr/bin/python3 nn/testdata/torch_parity4.py

and commit the JSON: CI does not need torch.
"""
import os
import torch
import torch.nn as tnn
import torch.nn.functional as F

import sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ in nn/testdata
from torchcase import Cases, param, t, write  # noqa: E402

torch.manual_seed(74)
torch.set_default_dtype(torch.float64)
cases = Cases()
add = cases.add


# 1. BatchNorm with variances near eps (x ~ 3e-3) and momentum 0.1.
for mode, bnc, eps, shape in [("1d_train", tnn.BatchNorm1d, 1e-5, (6, 3)), ("1d_eval", tnn.BatchNorm1d, 1e-5, (6, 3)),
                              ("2d_train", tnn.BatchNorm2d, 3e-5, (4, 3, 2, 3)), ("2d_eval", tnn.BatchNorm2d, 3e-5, (4, 3, 2, 3))]:
    bn = bnc(3, eps=eps, momentum=0.1)
    with torch.no_grad():
        bn.weight.normal_()
        bn.bias.normal_()
        bn.running_mean.normal_(std=1e-3)
        bn.running_var.uniform_(1e-5, 3e-5)
    bn.train(mode.endswith("train"))
    before = {"running_mean": bn.running_mean.clone(), "running_var": bn.running_var.clone()}
    add("batchnorm_" + mode, "batchnorm",
        {"channels": 3, "eps": eps, "momentum": 0.1, "mode": "eval" if mode.endswith("eval") else "train"},
        lambda x: bn(x), [torch.randn(*shape) * 3e-3 + 1e-3], {"weight": bn.weight, "bias": bn.bias})
    c = cases[-1]["tensors"]
    c.update({k: t(v) for k, v in before.items()})
    c.update({"running_mean_after": t(bn.running_mean), "running_var_after": t(bn.running_var)})

# 2. SpectralNorm: one power iteration from u, v (gonox's order), on a
# weight [4, 3] of norm ~1e-2, eps 0.05 (the floor decides both norms).
w = torch.randn(4, 3) * 1e-2
u0, v0 = torch.randn(4), torch.randn(3)
u1 = F.normalize(w @ v0, dim=0, eps=0.05)
v1 = F.normalize(w.t() @ u1, dim=0, eps=0.05)
sigma = u1 @ (w @ v1)
cases.append({"name": "spectral_eps", "kind": "spectral", "config": {"eps": 0.05},
              "tensors": {"weight": t(w), "u": t(u0), "v": t(v0), "u_after": t(u1), "v_after": t(v1),
                          "sigma": t(sigma), "y": t(w / sigma)}})

# 3. Losses, each with the three reductions where cheap.
RED = ("mean", "sum", "none")
xh = torch.randn(4, 3) * 1.5
xh = torch.where((1.2 - xh).abs() < 2e-2, xh + 0.05, xh)
yh = torch.tensor([[1., -1, -1], [-1, 1, -1], [1, 1, -1], [-1, -1, 1]])
for r in RED:
    add("hinge_embedding_" + r, "hinge_embedding", {"margin": 1.2, "reduction": r},
        lambda x, y: F.hinge_embedding_loss(x, y, margin=1.2, reduction=r), [xh, yh])
x1, x2 = torch.randn(5, 4), torch.randn(5, 4)
ye = torch.tensor([1., -1, 1, -1, -1])
for r in RED:
    add("cosine_embedding_" + r, "cosine_embedding", {"margin": -0.2, "reduction": r},
        lambda a, b, y: F.cosine_embedding_loss(a, b, y, margin=-0.2, reduction=r), [x1, x2, ye])
add("cosine_embedding_vec", "cosine_embedding", {"margin": 0.1, "reduction": "mean"},
    lambda a, b, y: F.cosine_embedding_loss(a, b, y, margin=0.1), [torch.randn(4), torch.randn(4), torch.tensor(-1.)])
xs = torch.randn(3, 4) * 3
ys = torch.where(torch.randn(3, 4) > 0, 1., -1.)
for r in RED:
    add("soft_margin_" + r, "soft_margin", {"reduction": r}, lambda x, y: F.soft_margin_loss(x, y, reduction=r), [xs, ys], const=(1,))
xm = torch.randn(3, 5)
ym = torch.tensor([[3, 0, -1, 1, 1], [1, 4, 2, 0, 3], [-1, 2, 0, 0, 0]])
for r in RED:
    add("multilabel_margin_" + r, "multilabel_margin", {"reduction": r},
        lambda x: F.multilabel_margin_loss(x, ym, reduction=r), [xm])
    cases[-1]["tensors"]["labels"] = t(ym)
add("multilabel_margin_vec", "multilabel_margin", {"reduction": "mean"},
    lambda x: F.multilabel_margin_loss(x, ym[0]), [xm[0]])
cases[-1]["tensors"]["labels"] = t(ym[0])
xl = torch.randn(3, 4) * 2
yl = (torch.randn(3, 4) > 0).double()
wl = torch.rand(4) + 0.5
for r in RED:
    add("multilabel_soft_margin_" + r, "multilabel_soft_margin", {"reduction": r},
        lambda x, y: F.multilabel_soft_margin_loss(x, y, reduction=r), [xl, yl])
add("multilabel_soft_margin_weight", "multilabel_soft_margin", {"reduction": "mean"},
    lambda x, y: F.multilabel_soft_margin_loss(x, y, weight=wl), [xl, yl], {"weight": wl})
pb = torch.rand(3, 4) * 0.98 + 0.01
yb = torch.rand(3, 4)
wb = torch.rand(4) + 0.5
for r in RED:
    add("bce_" + r, "bce", {"reduction": r}, lambda p, y: F.binary_cross_entropy(p, y, reduction=r), [pb, yb])
add("bce_weight", "bce", {"reduction": "mean"}, lambda p, y: F.binary_cross_entropy(p, y, weight=wb), [pb, yb],
    {"weight": wb})
# The clamp: p of 0 and 1 with targets 0 and 1 (finite losses of 100);
# only the values (torch's gradient divides by max(p(1-p), 1e-12) there).
pc = torch.tensor([0., 1., 0., 1., 0.3])
yc = torch.tensor([1., 0., 0., 1., 0.5])
cases.append({"name": "bce_clamp", "kind": "bce_value", "config": {"reduction": "none"},
              "tensors": {"x": t(pc), "x2": t(yc), "y": t(F.binary_cross_entropy(pc, yc, reduction="none"))}})
# kl_div's batchmean: gonox's tensor.Sum(KLDivergence(logp, q)) / N.
lp = F.log_softmax(torch.randn(3, 2, 4), -1)
q = F.softmax(torch.randn(3, 2, 4), -1)
add("kl_batchmean", "kl_batchmean", {}, lambda a, b: F.kl_div(a, b, reduction="batchmean"), [lp, q])

# 4. ctc_loss in float64 (gonox's recursion in float64), blank 0 and 3,
# repeated labels, padded frames and labels.
for blank, labels, ins, labs in [(0, [[1, 1, 2], [3, 1, 0], [2, 0, 0]], [7, 6, 4], [3, 2, 1]),
                                 (3, [[0, 2, 2], [1, 1, 1], [2, 0, 1]], [7, 7, 5], [3, 2, 3])]:
    lab = torch.tensor(labels)
    il, tl = torch.tensor(ins), torch.tensor(labs)
    add("ctc_blank%d" % blank, "ctc", {"blank": blank},
        lambda x: F.ctc_loss(F.log_softmax(x, -1).transpose(0, 1), lab, il, tl, blank=blank, reduction="none"),
        [torch.randn(3, 7, 4) * 2])
    cases[-1]["tensors"].update({
        "labels": t(lab),
        "logit_paddings": t((torch.arange(7)[None, :] >= il[:, None]).double()),
        "label_paddings": t((torch.arange(3)[None, :] >= tl[:, None]).double())})

# 5. embedding_bag: offsets with an empty bag, the three modes,
# per_sample_weights (sum), [B, L] indices; the weight's gradient.
wb = torch.randn(6, 3)
ib = torch.tensor([1, 4, 4, 0, 5, 2, 3])
ob = torch.tensor([0, 3, 3, 5])
psw = torch.rand(7) + 0.5
for mode in ("sum", "mean", "max"):
    w = param(wb)
    add("bag_" + mode, "bag", {"mode": mode}, lambda: F.embedding_bag(ib, w, ob, mode=mode), [], {"weight": w})
    cases[-1]["tensors"].update({"indices": t(ib), "offsets": t(ob)})
w = param(wb)
add("bag_sum_psw", "bag", {"mode": "sum"}, lambda p: F.embedding_bag(ib, w, ob, mode="sum", per_sample_weights=p),
    [psw], {"weight": w})
cases[-1]["tensors"].update({"indices": t(ib), "offsets": t(ob)})
w = param(wb)
i2 = torch.tensor([[0, 2, 5], [3, 3, 1]])
add("bag_mean_2d", "bag", {"mode": "mean"}, lambda: F.embedding_bag(i2, w, mode="mean"), [], {"weight": w})
cases[-1]["tensors"].update({"indices": t(i2)})

# 6. embedding_bag's padding_idx (a bag of padding only; a negative
# index), max_norm and norm_type (the weight PyTorch renormalises in place
# is recorded as "renormed"), include_last_offset, and all three with
# per_sample_weights.
ip = torch.tensor([1, 2, 2, 0, 5, 2, 3, 2, 4])
op = torch.tensor([0, 3, 3, 5, 7, 8])
wb = 2 * torch.randn(6, 3)
for name, mode, kw in [
    ("bag_pad_sum", "sum", {"padding_idx": 2}),
    ("bag_pad_mean", "mean", {"padding_idx": -4}),
    ("bag_pad_max", "max", {"padding_idx": 2}),
    ("bag_maxnorm_sum", "sum", {"max_norm": 1.5}),
    ("bag_maxnorm_p1_mean", "mean", {"max_norm": 2.0, "norm_type": 1.0}),
    ("bag_maxnorm_inf_max", "max", {"max_norm": 1.0, "norm_type": float("inf")}),
    ("bag_last_offset_mean", "mean", {"include_last_offset": True}),
]:
    w = param(wb)
    o = torch.cat([op, torch.tensor([len(ip)])]) if kw.get("include_last_offset") else op
    add(name, "bag", dict(mode=mode, **{k: v if v != float("inf") else "inf" for k, v in kw.items()}),
        lambda: F.embedding_bag(ip, w, o, mode=mode, **kw), [], {"weight": w})
    cases[-1]["tensors"].update({"indices": t(ip), "offsets": t(o), "renormed": t(w)})
w = param(wb)
o = torch.cat([op, torch.tensor([len(ip)])])
kw = {"padding_idx": 2, "max_norm": 1.5, "include_last_offset": True}
add("bag_all_psw", "bag", dict(mode="sum", **kw),
    lambda p: F.embedding_bag(ip, w, o, mode="sum", per_sample_weights=p, **kw), [torch.rand(9) + 0.5], {"weight": w})
cases[-1]["tensors"].update({"indices": t(ip), "offsets": t(o), "renormed": t(w)})


write("torch_parity4.json", cases, newline=False)
