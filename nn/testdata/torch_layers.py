#!/usr/bin/python3
"""Writes torch_layers.json: PyTorch's outputs and gradients for the parts
of nn that torch_conv.py, torch_attention.py, torch_rnn.py and
torch_losses.py leave out, and for the conventions where libraries differ:

- every activation of activation.go and activation_more.go (also at the
  kinks -3, -1, 0, 1, 3, 6, where nn follows JAX), and PReLU with
  one slope per channel (forward and input gradient; PReLU's slope
  gradient);
- Linear (torch's weight is [out, in], gonox's W is [in, out]);
- LayerNorm without affine parameters and with a large eps, RMSNorm (torch
  1.13 has no nn.RMSNorm: x·rsqrt(mean(x²) + eps)·weight, the formula of
  PyTorch 2.4's nn.RMSNorm, by autograd), GroupNorm without affine
  parameters, BatchNorm1d on [N, C] inputs;
- Embedding with repeated ids (the gradient rows add up);
- ConvTranspose with asymmetric padding pairs (PyTorch's output cropped)
  and with groups, dilation and output_padding together;
- Conv with asymmetric padding (F.pad, then the convolution), with
  padding="same" for even kernels and dilations (PyTorch puts the odd
  padding element at the high end, as JAX's "SAME");
- MaxPool with ties (the gradient to the first maximum), MaxPool and
  AvgPool with ceil_mode (count_include_pad on and off: a
  last window that starts inside the padding is divided by the part of it
  inside input+padding), AdaptiveAvgPool/AdaptiveMaxPool with overlapping
  uneven windows in 1-D and 3-D;
- MultiheadAttention across sequences with kdim and vdim and a
  key_padding_mask;
- softmax, log_softmax, logsumexp, cumsum, erf, F.pad against tensor's
  functions, InstanceNorm as GroupNorm with a group per channel;
- cross-entropy with label_smoothing (gonox: SoftmaxCrossEntropyProbs of
  SmoothLabels(one-hot)), binary_cross_entropy_with_logits, mse_loss,
  ctc_loss with blank 2 and repeated labels, torchvision's
  sigmoid_focal_loss (its formula, by autograd),
  huber_loss, smooth_l1_loss (HuberLoss(delta=beta)/beta), kl_div (with and without log_target), cosine_similarity,
  with the gradients of both operands where torch gives them;
- F.cross_entropy with ignore_index, weight, label_smoothing and each
  reduction on [N, C] and [N, T, C] logits, and
  F.binary_cross_entropy_with_logits with weight and pos_weight, for
  nn.CrossEntropy and nn.BinaryCrossEntropyWithLogits: written to
  torch_crossentropy.json (crossentropy_test.go reads it).

Inputs are written with 17 significant digits, so that the Go side reads
exactly the float64 values torch computed with; everything is float64, and
the Go test (torch_layers_test.go) runs the gonox layers in float64 too.
Run with Debian's python3-torch (PyTorch 1.13):

    /usr/bin/python3 nn/testdata/torch_layers.py

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

torch.manual_seed(51)
torch.set_default_dtype(torch.float64)
cases = Cases(scalar_one=False)
add = cases.add


# Activations: values away from the kinks (0, ±1, 6, ±3), where the
# libraries' one-sided gradients are allowed to differ.
xa = torch.randn(4, 6) * 3
xa = torch.where((xa.abs() < 1e-3) | ((xa.abs() - 1).abs() < 1e-3) | ((xa.abs() - 3).abs() < 1e-3) | ((xa - 6).abs() < 1e-3), xa + 0.1, xa)
acts = {
    "Relu": F.relu,
    "Gelu": lambda x: F.gelu(x, approximate="tanh"),
    "GeluExact": F.gelu,
    "Silu": F.silu,
    "Tanh": torch.tanh,
    "Sigmoid": torch.sigmoid,
    "Softplus": F.softplus,
    "LeakyRelu": F.leaky_relu,
    "LeakyRelu0.2": lambda x: F.leaky_relu(x, 0.2),
    "Elu": F.elu,
    "Elu0.5": lambda x: F.elu(x, 0.5),
    "Selu": F.selu,
    "Celu": F.celu,
    "Celu0.7": lambda x: F.celu(x, 0.7),
    "Mish": F.mish,
    "Relu6": F.relu6,
    "HardTanh": F.hardtanh,
    "HardSigmoid": F.hardsigmoid,
    "HardSwish": F.hardswish,
    "Softsign": F.softsign,
    "Glu": F.glu,
}
for name, f in acts.items():
    add("act_" + name, "act", {"act": name}, f, [xa * (3 if name == "Relu6" else 1)])

# The same activations at their kinks, where the gradient is a convention:
# nn follows JAX's, and the Go test lists where PyTorch's differs.
kinks = torch.tensor([-3.0, -1.0, 0.0, 1.0, 3.0, 6.0])
for name, f in acts.items():
    if name != "Glu":
        add("kink_" + name, "kink", {"act": name}, f, [kinks])
add("kink_PReLU", "kink", {"act": "PReLU"}, lambda x: F.prelu(x, torch.tensor([0.25])), [kinks])

w = torch.rand(3) * 0.5
add("prelu_channels", "prelu", {}, lambda x, a: F.prelu(x, a), [torch.randn(2, 3, 5), w])

lin = tnn.Linear(5, 3)
add("linear", "linear", {}, lambda x: lin(x), [torch.randn(2, 4, 5)], {"weight": lin.weight, "bias": lin.bias})

add("layernorm_noaffine", "layernorm", {"eps": 1e-5, "affine": False},
    lambda x: F.layer_norm(x, (6,), eps=1e-5), [torch.randn(2, 3, 6) * 2 + 1])
lw, lb = param(torch.randn(6)), param(torch.randn(6))
add("layernorm_eps", "layernorm", {"eps": 0.5, "affine": True},
    lambda x: F.layer_norm(x, (6,), lw, lb, eps=0.5), [torch.randn(2, 3, 6) * 0.5], {"weight": lw, "bias": lb})
rw = param(torch.randn(6))
add("rmsnorm", "rmsnorm", {"eps": 0.1, "affine": True},
    lambda x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 0.1) * rw, [torch.randn(2, 3, 6) * 0.7], {"weight": rw})
add("rmsnorm_noaffine", "rmsnorm", {"eps": 1e-5, "affine": False},
    lambda x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5), [torch.randn(4, 6)])
add("groupnorm_noaffine", "groupnorm", {"groups": 2, "channels": 4, "eps": 1e-3},
    lambda x: F.group_norm(x, 2, eps=1e-3), [torch.randn(3, 4, 5) * 2])

for mode, bnc, eps, shape in [("train", tnn.BatchNorm1d, 1e-5, (6, 3)), ("eval", tnn.BatchNorm1d, 1e-5, (6, 3)),
                              ("2d_eps_train", tnn.BatchNorm2d, 0.5, (4, 3, 2, 3)), ("2d_eps_eval", tnn.BatchNorm2d, 0.5, (4, 3, 2, 3))]:
    bn = bnc(3, eps=eps, momentum=0.3)
    with torch.no_grad():
        bn.weight.normal_()
        bn.bias.normal_()
        bn.running_mean.normal_()
        bn.running_var.uniform_(0.5, 1.5)
    bn.train(mode.endswith("train"))
    before = {"running_mean": bn.running_mean.clone(), "running_var": bn.running_var.clone()}
    add("batchnorm_" + ("1d_nc_" + mode if shape == (6, 3) else mode), "batchnorm",
        {"channels": 3, "eps": eps, "momentum": 0.3, "mode": "eval" if mode.endswith("eval") else "train"},
        lambda x: bn(x), [torch.randn(*shape) * 2 + 1], {"weight": bn.weight, "bias": bn.bias})
    c = cases[-1]["tensors"]
    c.update({k: t(v) for k, v in before.items()})
    c.update({"running_mean_after": t(bn.running_mean), "running_var_after": t(bn.running_var)})

emb = tnn.Embedding(7, 3)
ids = torch.tensor([[1, 4, 1], [6, 0, 1]])
add("embedding", "embedding", {}, lambda i: emb(i), [ids], {"weight": emb.weight})

# Conv2d with asymmetric padding: (top, bottom) = (0, 2), (left, right) = (1, 0).
cw, cb = param(torch.randn(4, 2, 3, 2)), param(torch.randn(4))
add("conv2d_asym_pad", "conv", {"padding": [[0, 2], [1, 0]], "stride": [2, 1], "dilation": [1, 1], "groups": 1},
    lambda x: F.conv2d(F.pad(x, (1, 0, 0, 2)), cw, cb, stride=(2, 1)), [torch.randn(2, 2, 6, 5)], {"weight": cw, "bias": cb})
# padding="same" with an even kernel (total 3: 1 low, 2 high) and a
# dilation (total 2·(2-1)·... see PyTorch's _conv_forward).
sw = param(torch.randn(3, 2, 4, 2))
add("conv2d_same_even", "conv", {"same": True, "stride": [1, 1], "dilation": [1, 3], "groups": 1},
    lambda x: F.conv2d(x, sw, None, padding="same", dilation=(1, 3)), [torch.randn(2, 2, 6, 7)], {"weight": sw})
s1 = param(torch.randn(4, 1, 4))
add("conv1d_same_groups", "conv", {"same": True, "stride": [1], "dilation": [1], "groups": 2},
    lambda x: F.conv1d(x, s1, None, padding="same", groups=2), [torch.randn(2, 2, 9)], {"weight": s1})

# ConvTranspose with asymmetric padding pairs (those of the convolution it
# transposes: the output loses lo elements at the start and hi at the end):
# PyTorch's symmetric padding 0, then the crop.
tw, tb = param(torch.randn(4, 3, 3, 2)), param(torch.randn(3))
add("convtranspose2d_asym_pad", "convtranspose", {"padding": [[2, 0], [0, 1]], "stride": [2, 3], "dilation": [1, 2],
                                                  "output_padding": [1, 0], "groups": 1},
    lambda x: F.conv_transpose2d(x, tw, tb, stride=(2, 3), dilation=(1, 2), output_padding=(1, 0))[:, :, 2:, :-1],
    [torch.randn(2, 4, 4, 3)], {"weight": tw, "bias": tb})
tw1 = param(torch.randn(4, 1, 3))
add("convtranspose1d_groups_dil_outpad", "convtranspose", {"padding": [[1, 1]], "stride": [3], "dilation": [2],
                                                          "output_padding": [2], "groups": 4},
    lambda x: F.conv_transpose1d(x, tw1, None, stride=3, padding=1, dilation=2, output_padding=2, groups=4),
    [torch.randn(2, 4, 5)], {"weight": tw1})

pools = [
    ("maxpool2d_ceil", "maxpool", dict(kernel=[3, 3], stride=[2, 2], padding=[1, 1], ceil=True),
     lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True), (2, 2, 8, 7)),
    ("maxpool1d_ceil_nopad", "maxpool", dict(kernel=[2], stride=[2], padding=[0], ceil=True),
     lambda x: F.max_pool1d(x, 2, 2, 0, ceil_mode=True), (2, 3, 9)),
    ("avgpool2d_ceil", "avgpool", dict(kernel=[3, 3], stride=[2, 2], padding=[1, 1], ceil=True, count_include_pad=True),
     lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=True), (2, 2, 8, 7)),
    ("avgpool2d_ceil_nopad", "avgpool", dict(kernel=[3, 3], stride=[2, 2], padding=[1, 1], ceil=True, count_include_pad=False),
     lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False), (2, 2, 8, 7)),
    ("avgpool1d_ceil", "avgpool", dict(kernel=[3], stride=[2], padding=[0], ceil=True, count_include_pad=True),
     lambda x: F.avg_pool1d(x, 3, 2, 0, ceil_mode=True), (2, 3, 8)),
    # ceil mode where the last window would start inside the high padding:
    # PyTorch drops it (in 5, kernel 2, stride 2, padding 1: 3 windows, not 4).
    ("maxpool1d_ceil_drop", "maxpool", dict(kernel=[2], stride=[2], padding=[1], ceil=True),
     lambda x: F.max_pool1d(x, 2, 2, 1, ceil_mode=True), (2, 3, 5)),
    ("avgpool1d_ceil_drop", "avgpool", dict(kernel=[2], stride=[2], padding=[1], ceil=True, count_include_pad=True),
     lambda x: F.avg_pool1d(x, 2, 2, 1, ceil_mode=True), (2, 3, 5)),
    ("avgpool3d_ceil_nopad", "avgpool", dict(kernel=[2, 3, 2], stride=[2, 2, 2], padding=[0, 1, 1], ceil=True, count_include_pad=False),
     lambda x: F.avg_pool3d(x, (2, 3, 2), 2, (0, 1, 1), ceil_mode=True, count_include_pad=False), (1, 2, 5, 6, 5)),
    ("avgpool3d_ceil", "avgpool", dict(kernel=[2, 3, 2], stride=[2, 2, 2], padding=[0, 1, 1], ceil=True, count_include_pad=True),
     lambda x: F.avg_pool3d(x, (2, 3, 2), 2, (0, 1, 1), ceil_mode=True, count_include_pad=True), (1, 2, 5, 6, 5)),
    ("adaptiveavg1d_overlap", "adaptiveavg", dict(output=[3]), lambda x: F.adaptive_avg_pool1d(x, 3), (2, 3, 5)),
    ("adaptiveavg1d_up", "adaptiveavg", dict(output=[7]), lambda x: F.adaptive_avg_pool1d(x, 7), (2, 3, 4)),
    ("adaptiveavg3d", "adaptiveavg", dict(output=[2, 3, 2]), lambda x: F.adaptive_avg_pool3d(x, (2, 3, 2)), (1, 2, 5, 4, 3)),
    ("adaptivemax1d_overlap", "adaptivemax", dict(output=[3]), lambda x: F.adaptive_max_pool1d(x, 3), (2, 3, 5)),
]
for name, kind, cfg, f, shape in pools:
    add(name, kind, cfg, f, [torch.randn(*shape)])

# Max pooling with ties (integer inputs): PyTorch sends a window's gradient
# to the first of its maxima in row-major order.
ties = [
    ("maxpool2d_ties", "maxpool", dict(kernel=[3, 3], stride=[2, 2], padding=[1, 1]),
     lambda x: F.max_pool2d(x, 3, 2, 1), (2, 2, 6, 5)),
    ("maxpool1d_ties_overlap", "maxpool", dict(kernel=[3], stride=[1], padding=[0]),
     lambda x: F.max_pool1d(x, 3, 1), (2, 2, 9)),
    ("adaptivemax2d_ties", "adaptivemax", dict(output=[2, 3]), lambda x: F.adaptive_max_pool2d(x, (2, 3)), (2, 2, 5, 7)),
]
for name, kind, cfg, f, shape in ties:
    add(name, kind, cfg, f, [torch.randint(-1, 2, shape).double()])

# Losses, reduction="none" (the mean is the caller's; gonox's losses are
# per element or per row).
logits = torch.randn(5, 4) * 2
labels = torch.tensor([0, 3, 1, 1, 2])
add("cross_entropy_smooth", "ce_smooth", {"alpha": 0.2},
    lambda x, l: F.cross_entropy(x, l, reduction="none", label_smoothing=0.2), [logits, labels])
add("bce_with_logits", "bce", {}, lambda x, y: F.binary_cross_entropy_with_logits(x, y, reduction="none"),
    [torch.randn(3, 4) * 3, torch.rand(3, 4)])
add("mse", "mse", {}, lambda x, y: F.mse_loss(x, y, reduction="none"), [torch.randn(3, 4), torch.randn(3, 4)])
add("huber", "huber", {"delta": 0.8}, lambda x, y: F.huber_loss(x, y, reduction="none", delta=0.8),
    [torch.randn(3, 4) * 2, torch.randn(3, 4)])
add("smooth_l1", "smooth_l1", {"beta": 0.6}, lambda x, y: F.smooth_l1_loss(x, y, reduction="none", beta=0.6),
    [torch.randn(3, 4) * 2, torch.randn(3, 4)])


def focal(x, y, gamma, alpha=None):
    """torchvision.ops.sigmoid_focal_loss (reduction "none"), by autograd."""
    p = torch.sigmoid(x)
    ce = F.binary_cross_entropy_with_logits(x, y, reduction="none")
    p_t = p * y + (1 - p) * (1 - y)
    loss = ce * (1 - p_t) ** gamma
    if alpha is not None:
        loss = (alpha * y + (1 - alpha) * (1 - y)) * loss
    return loss


yb = (torch.rand(3, 4) > 0.5).double()
add("sigmoid_focal", "focal", {"gamma": 2.0}, lambda x: focal(x, yb, 2.0), [torch.randn(3, 4) * 2])
cases[-1]["tensors"]["labels"] = t(yb)
add("sigmoid_focal_alpha", "focal", {"gamma": 1.5, "alpha": 0.25}, lambda x: focal(x, yb, 1.5, 0.25), [torch.randn(3, 4) * 2])
cases[-1]["tensors"]["labels"] = t(yb)
# CTC with a blank other than 0, repeated labels (which need a blank
# between them) and ragged frame and label counts: the loss per sequence
# and the gradient with respect to the logits.
B_, T_, K_, N_ = 3, 8, 5, 4
ctc_labels = torch.tensor([[1, 1, 3, 0], [4, 0, 4, 4], [3, 0, 0, 0]])
ctc_in, ctc_lab = torch.tensor([8, 7, 5]), torch.tensor([3, 4, 1])
add("ctc_blank2", "ctc", {"blank": 2},
    lambda x: F.ctc_loss(F.log_softmax(x, -1).transpose(0, 1), ctc_labels, ctc_in, ctc_lab, blank=2, reduction="none"),
    [torch.randn(B_, T_, K_) * 2])
cases[-1]["tensors"].update({
    "labels": {"shape": [B_, N_], "data": [float(v) for v in ctc_labels.flatten().tolist()]},
    "logit_paddings": t((torch.arange(T_)[None, :] >= ctc_in[:, None]).double()),
    "label_paddings": t((torch.arange(N_)[None, :] >= ctc_lab[:, None]).double())})
lp = F.log_softmax(torch.randn(3, 5), -1)
q = F.softmax(torch.randn(3, 5) * 2, -1)
add("kl_div", "kl", {}, lambda a, b: F.kl_div(a, b, reduction="none").sum(-1), [lp, q])
add("kl_div_log_target", "kl_log", {}, lambda a, b: F.kl_div(a, b, reduction="none", log_target=True).sum(-1), [lp, q.log()])
add("cosine_similarity", "cosine", {}, lambda a, b: F.cosine_similarity(a, b, dim=-1, eps=1e-12),
    [torch.randn(3, 5), torch.randn(3, 5)])

# tensor's functional forms a PyTorch user maps one to one, over a middle
# axis where an axis can be got wrong.
xf = torch.randn(2, 5, 3) * 2
add("fn_softmax", "fn", {"fn": "softmax"}, lambda x: F.softmax(x, dim=1), [xf])
add("fn_log_softmax", "fn", {"fn": "log_softmax"}, lambda x: F.log_softmax(x, dim=1), [xf])
add("fn_logsumexp", "fn", {"fn": "logsumexp"}, lambda x: torch.logsumexp(x, dim=1), [xf])
add("fn_cumsum", "fn", {"fn": "cumsum"}, lambda x: torch.cumsum(x, dim=1), [xf])
add("fn_erf", "fn", {"fn": "erf"}, torch.erf, [xf])
add("fn_pad", "fn", {"fn": "pad"}, lambda x: F.pad(x, (2, 0, 1, 3), value=0.5), [xf])
# InstanceNorm (no running statistics) is GroupNorm with a group per channel.
iw, ib = param(torch.randn(3)), param(torch.randn(3))
add("instancenorm2d_affine", "instancenorm", {"channels": 3, "eps": 1e-3},
    lambda x: F.instance_norm(x, weight=iw, bias=ib, eps=1e-3), [torch.randn(2, 3, 4, 5) * 3], {"weight": iw, "bias": ib})

# Cross-attention with kdim/vdim other than embed_dim (separate q, k, v
# projections), queries and keys of different lengths, and a key padding
# mask (True: hidden in PyTorch; gonox's masks are True: visible).
E, H, B, T, S_, KD, VD = 6, 2, 2, 3, 5, 4, 7
m = tnn.MultiheadAttention(E, H, bias=True, batch_first=True, kdim=KD, vdim=VD)
with torch.no_grad():
    m.in_proj_bias.normal_()
    m.out_proj.bias.normal_()
q, k, v = torch.randn(B, T, E), torch.randn(B, S_, KD), torch.randn(B, S_, VD)
kpm = torch.tensor([[False] * S_, [False, False, False, True, True]])
params = {"wq": m.q_proj_weight, "wk": m.k_proj_weight, "wv": m.v_proj_weight, "wo": m.out_proj.weight, "bo": m.out_proj.bias}
ins = [q.clone().requires_grad_(True), k.clone().requires_grad_(True), v.clone().requires_grad_(True)]
y, _ = m(*ins, key_padding_mask=kpm, need_weights=False)
g = torch.randn_like(y)
y.backward(g)
b = m.in_proj_bias
tens = {"x": t(ins[0]), "x2": t(ins[1]), "x3": t(ins[2]), "y": t(y), "g": t(g),
        "dx": t(ins[0].grad), "dx2": t(ins[1].grad), "dx3": t(ins[2].grad),
        "bq": t(b[:E]), "bk": t(b[E:2 * E]), "bv": t(b[2 * E:]),
        "dbq": t(b.grad[:E]), "dbk": t(b.grad[E:2 * E]), "dbv": t(b.grad[2 * E:]),
        "key_padding_mask": {"shape": list(kpm.shape), "data": [float(v) for v in kpm.flatten().tolist()]}}
for n, p in params.items():
    tens[n] = t(p)
    tens["d" + n] = t(p.grad)
cases.append({"name": "mha_cross_kdim_vdim_key_padding", "kind": "mha_cross", "config": {"heads": H}, "tensors": tens})

# nn.CrossEntropy and nn.BinaryCrossEntropyWithLogits (crossentropy.go),
# PyTorch's functional forms with ignore_index, weight, label_smoothing,
# pos_weight and each reduction, written to torch_crossentropy.json (read
# by crossentropy_test.go) so that the cases above keep their random
# numbers. gonox's class axis is the last: PyTorch gets [N, C, T] as
# x.transpose(1, 2) of gonox's [N, T, C].
torch.manual_seed(52)
xent_cases = []


def ints(v):
    return {"shape": list(v.shape), "data": [float(i) for i in v.flatten().tolist()]}


def add_xent(name, shape, ignore=None, weights=False, smoothing=0.0, reduction="mean", pad=()):
    C = shape[-1]
    x = (torch.randn(*shape) * 2).requires_grad_(True)
    labels = torch.randint(0, C, shape[:-1])
    flat = labels.view(-1)
    for i in pad:  # positions holding the ignored index
        flat[i] = ignore
    w = torch.rand(C) + 0.5 if weights else None
    xt = x if x.dim() == 2 else x.transpose(1, 2)
    kw = {"reduction": reduction, "label_smoothing": smoothing, "weight": w}
    if ignore is not None:
        kw["ignore_index"] = ignore
    y = F.cross_entropy(xt, labels, **kw)
    g = torch.randn_like(y)
    y.backward(g)
    tens = {"x": t(x), "labels": ints(labels), "y": t(y), "g": t(g), "dx": t(x.grad)}
    if w is not None:
        tens["weights"] = t(w)
    xent_cases.append({"name": name, "kind": "cross_entropy", "config": {"ignore": ignore, "smoothing": smoothing,
                       "reduction": reduction}, "tensors": tens})


add_xent("plain_mean", (5, 4))
add_xent("plain_sum", (5, 4), reduction="sum")
add_xent("plain_none", (5, 4), reduction="none")
add_xent("ignore_-100_mean", (6, 4), ignore=-100, pad=(1, 4))
add_xent("ignore_class0_sum", (6, 4), ignore=0, pad=(0, 2))
add_xent("ignore_none", (6, 4), ignore=-100, pad=(3,), reduction="none")
add_xent("weights_mean", (6, 5), weights=True)
add_xent("weights_ignore_mean", (6, 5), ignore=-100, weights=True, pad=(0, 5))
add_xent("weights_sum", (6, 5), weights=True, reduction="sum")
add_xent("smoothing_mean", (5, 4), smoothing=0.1)
add_xent("smoothing_ignore_mean", (6, 4), ignore=-100, smoothing=0.2, pad=(2,))
add_xent("smoothing_weights_mean", (6, 5), weights=True, smoothing=0.15)
add_xent("smoothing_weights_ignore_mean", (7, 5), ignore=3, weights=True, smoothing=0.3, pad=(1, 6))
add_xent("smoothing_weights_ignore_sum", (7, 5), ignore=-100, weights=True, smoothing=0.3, pad=(0, 4), reduction="sum")
add_xent("smoothing_weights_ignore_none", (7, 5), ignore=-100, weights=True, smoothing=0.3, pad=(2, 3), reduction="none")
add_xent("NTC_plain_mean", (2, 3, 4))
add_xent("NTC_weights_smoothing_ignore_mean", (3, 4, 5), ignore=-100, weights=True, smoothing=0.1, pad=(0, 5, 11))
add_xent("NTC_ignore_sum", (3, 4, 5), ignore=-100, pad=(1, 7), reduction="sum")
add_xent("NTC_weights_smoothing_ignore_none", (3, 4, 5), ignore=-100, weights=True, smoothing=0.25, pad=(3, 8), reduction="none")


def add_bce(name, shape, weight=None, pos_weight=None, reduction="mean"):
    x = (torch.randn(*shape) * 3).requires_grad_(True)
    y_ = torch.rand(*shape).requires_grad_(True)  # soft targets
    y = F.binary_cross_entropy_with_logits(x, y_, weight=weight, pos_weight=pos_weight, reduction=reduction)
    g = torch.randn_like(y)
    y.backward(g)
    tens = {"x": t(x), "x2": t(y_), "y": t(y), "g": t(g), "dx": t(x.grad), "dx2": t(y_.grad)}
    if weight is not None:
        tens["weight"] = t(weight)
    if pos_weight is not None:
        tens["pos_weight"] = t(pos_weight)
    xent_cases.append({"name": name, "kind": "bce_with_logits", "config": {"reduction": reduction}, "tensors": tens})


add_bce("bce_plain_mean", (4, 3))
add_bce("bce_pos_weight_mean", (4, 3), pos_weight=torch.rand(3) * 3)
add_bce("bce_weight_rows_pos_weight_sum", (4, 3), weight=torch.rand(4, 1), pos_weight=torch.rand(3) * 3, reduction="sum")
add_bce("bce_weight_pos_weight_none_3d", (2, 4, 3), weight=torch.rand(3), pos_weight=torch.rand(3) * 3, reduction="none")

xout = write("torch_crossentropy.json", xent_cases, separators=(",", ":"), allow_nan=False)
print("wrote", xout, len(xent_cases), "cases")

out = write("torch_layers.json", cases)
print("wrote", out, len(cases), "cases")
