#!/usr/bin/python3
"""Writes torch_transformer.json: PyTorch's torch.nn.TransformerEncoderLayer,
TransformerDecoderLayer, TransformerEncoder, TransformerDecoder and
Transformer for nn's layers of those names (transformer_test.go reads it).

Each case builds one module (d_model 4, nhead 2, dim_feedforward 6:
small, so that the file stays small, and the feed-forward weights are
not square, so that a transposed one fails on its shape; post-norm and
pre-norm, relu and gelu, batch_first or not, unbatched) in eval mode,
randomizes every parameter (biases and LayerNorm affines included, to
multiples of 1/64: exact in float32, short in the JSON), and
runs it with grad enabled on inputs with masks: src_mask / tgt_mask as
generate_square_subsequent_mask (float, -inf above the diagonal) or its
bool form, random additive float masks [batch*nhead, T, S], bool or
float key padding masks, memory masks. With grad enabled PyTorch 1.13
takes its math path, not the inference fast path
(torch._transformer_encoder_layer_fwd, nested tensors). The loss is
sum(y*g) for a random cotangent g; the file holds the inputs, the masks
(bool as 0/1, the causal float masks by name since JSON has no -inf), the
parameters under PyTorch's state_dict names and layout ("p." + name),
the output and the gradients of every input and parameter ("d." + name).

Everything is float64, written with 17 significant digits. Run with
Debian's python3-torch (PyTorch 1.13) from the repository root:

    /usr/bin/python3 nn/testdata/torch_transformer.py

and commit the JSON: CI does not need torch.

With --bench it writes nothing and times instead the step of nn's
BenchmarkTransformerEncoderLayer (forward and backward of sum(y*y), float32,
batch_first [16, 64, 256], 8 heads, dim_feedforward 1024, no dropout) in
wall and CPU time, for docs/performance.md:

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 /usr/bin/python3 nn/testdata/torch_transformer.py --bench
"""
import os
import sys
import time

import torch
import torch.nn as tnn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ in nn/testdata
from torchcase import t, write  # noqa: E402


def bench():
    torch.set_num_threads(1)
    m = tnn.TransformerEncoderLayer(256, 8, dim_feedforward=1024, dropout=0.0, batch_first=True)
    x = torch.randn(16, 64, 256)
    for name, mask in [("nomask", None),
                       ("boolcausal", torch.triu(torch.ones(64, 64, dtype=torch.bool), 1)),
                       ("floatcausal", tnn.Transformer.generate_square_subsequent_mask(64))]:
        def step():
            m.zero_grad()
            (m(x, src_mask=mask) ** 2).sum().backward()
        for _ in range(2):
            step()
        n = 20
        c0, w0 = time.process_time(), time.perf_counter()
        for _ in range(n):
            step()
        print("torch TransformerEncoderLayer/%s %.2f cpu-ms/step %.2f ms/step" % (
            name, (time.process_time() - c0) / n * 1e3, (time.perf_counter() - w0) / n * 1e3))


if "--bench" in sys.argv:
    bench()
    sys.exit(0)

torch.set_default_dtype(torch.float64)
torch.manual_seed(0)

D, H, FF = 4, 2, 6
cases = []


def randomize(m):
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith("norm1.weight") or name.endswith("norm2.weight") or \
                    name.endswith("norm3.weight") or name.endswith("norm.weight"):
                p.copy_(dyadic(1 + 0.2 * torch.randn_like(p)))
            else:
                p.copy_(dyadic(0.4 * torch.randn_like(p)))


def dyadic(x):
    """Rounds x to multiples of 1/64: exact in float32 and float64, and
    short in the JSON."""
    return torch.round(x * 64) / 64


def mask(spec, n_q, n_k, batch):
    """Returns (torch mask, config entry, tensors) for a mask spec."""
    if spec is None:
        return None, None, {}
    if spec == "causal_float":
        return tnn.Transformer.generate_square_subsequent_mask(n_q), "causal_float", {}
    if spec == "causal_bool":
        return torch.triu(torch.ones(n_q, n_k, dtype=torch.bool), 1), "causal_bool", {}
    if spec == "float3":  # random additive [batch*nhead, n_q, n_k]
        m = 0.5 * torch.randn(batch * H, n_q, n_k)
        return m, "float", {"": m}
    if spec == "bool3":  # random bool [batch*nhead, n_q, n_k], the diagonal and key 0 visible
        m = torch.rand(batch * H, n_q, n_k) < 0.3
        m[:, torch.arange(min(n_q, n_k)), torch.arange(min(n_q, n_k))] = False
        m[:, :, 0] = False  # no row all masked (key padding masks the last keys)
        return m, "bool", {"": m.double()}
    raise ValueError(spec)


def padding(spec, batch, n, unbatched=False):
    if spec is None:
        return None, None, {}
    m = torch.zeros(batch, n, dtype=torch.bool)
    for b in range(batch):
        m[b, n - b:] = True  # example b has b padded positions at the end
    if unbatched:
        m = m[-1]
    if spec == "bool":
        return m, "bool", {"": m.double()}
    if spec == "float":
        f = torch.zeros(m.shape).masked_fill(m, -1e4) + 0.1 * torch.randn(m.shape)
        return f, "float", {"": f}
    raise ValueError(spec)


def add(name, kind, module, config, inputs, masks):
    """inputs: dict of name -> tensor (requires grad); masks: dict of kwarg -> spec result."""
    module.eval()
    randomize(module)
    kwargs, tensors = {}, {}
    for k, (m, cfg, ts) in masks.items():
        kwargs[k] = m
        if cfg is not None:
            config[k] = cfg
        for suffix, v in ts.items():
            tensors[k + suffix] = t(v)
    for k, v in inputs.items():
        v.requires_grad_(True)
        tensors[k] = t(v)
    with torch.enable_grad():
        y = module(*inputs.values(), **kwargs)
        g = torch.randn_like(y)
        (y * g).sum().backward()
    tensors["y"], tensors["g"] = t(y), t(g)
    for k, v in inputs.items():
        tensors["d" + k] = t(v.grad)
    for pn, p in module.named_parameters():
        tensors["p." + pn] = t(p)
        tensors["d." + pn] = t(p.grad)
    cases.append({"name": name, "kind": kind, "config": config, "tensors": tensors})


def opts(act="relu", bf=False, nf=False):
    return dict(dim_feedforward=FF, dropout=0.1, activation=act, batch_first=bf, norm_first=nf,
                layer_norm_eps=1e-5)


def cfg(act="relu", bf=False, nf=False, **kw):
    c = {"activation": act, "batch_first": bf, "norm_first": nf, "d_model": D, "nhead": H, "dim_feedforward": FF}
    c.update(kw)
    return c


def seq(T, B, bf):
    return torch.randn(B, T, D) if bf else torch.randn(T, B, D)


B, T, S = 2, 4, 3

# Encoder layers.
for name, act, bf, nf, sm, kp in [
    ("enc_post_relu", "relu", False, False, None, None),
    ("enc_pre_gelu_bf_causal_pad", "gelu", True, True, "causal_float", "bool"),
    ("enc_post_boolmasks", "relu", False, False, "causal_bool", "bool"),
    ("enc_pre_float3", "relu", False, True, "float3", None),
    ("enc_post_gelu_floatpad", "gelu", True, False, None, "float"),
    ("enc_bool3_pad", "relu", True, False, "bool3", "bool"),
]:
    m = tnn.TransformerEncoderLayer(D, H, **opts(act, bf, nf))
    add(name, "encoder_layer", m, cfg(act, bf, nf),
        {"src": seq(T, B, bf)},
        {"src_mask": mask(sm, T, T, B), "src_key_padding_mask": padding(kp, B, T)})

# One unbatched example [T, D].
m = tnn.TransformerEncoderLayer(D, H, **opts("gelu", False, True))
add("enc_unbatched", "encoder_layer", m, cfg("gelu", False, True, unbatched=True),
    {"src": torch.randn(T, D)},
    {"src_mask": mask("causal_float", T, T, 1), "src_key_padding_mask": padding("bool", 2, T, unbatched=True)})

# An encoder stack of 2 layers with a final norm.
for name, nf, bf in [("encoder_post_norm", False, False), ("encoder_pre_norm_bf", True, True)]:
    layer = tnn.TransformerEncoderLayer(D, H, **opts("relu", bf, nf))
    m = tnn.TransformerEncoder(layer, 2, norm=tnn.LayerNorm(D), enable_nested_tensor=False)
    add(name, "encoder", m, cfg("relu", bf, nf, layers=2, norm=True),
        {"src": seq(T, B, bf)},
        {"mask": mask("causal_bool", T, T, B), "src_key_padding_mask": padding("bool", B, T)})

# Decoder layers.
for name, act, bf, nf, tm, mm, tkp, mkp in [
    ("dec_post_relu", "relu", False, False, None, None, None, None),
    ("dec_post_causal_mempad", "relu", False, False, "causal_float", None, None, "bool"),
    ("dec_pre_gelu_bf_all", "gelu", True, True, "causal_bool", "float3", "bool", "bool"),
    ("dec_post_gelu_memmask", "gelu", True, False, "causal_float", "bool3", None, "bool"),
]:
    m = tnn.TransformerDecoderLayer(D, H, **opts(act, bf, nf))
    add(name, "decoder_layer", m, cfg(act, bf, nf),
        {"tgt": seq(T, B, bf), "memory": seq(S, B, bf)},
        {"tgt_mask": mask(tm, T, T, B), "memory_mask": mask(mm, T, S, B),
         "tgt_key_padding_mask": padding(tkp, B, T), "memory_key_padding_mask": padding(mkp, B, S)})

# A decoder stack of 2 layers with a final norm.
layer = tnn.TransformerDecoderLayer(D, H, **opts("relu", False, True))
m = tnn.TransformerDecoder(layer, 2, norm=tnn.LayerNorm(D))
add("decoder_pre_norm", "decoder", m, cfg("relu", False, True, layers=2, norm=True),
    {"tgt": seq(T, B, False), "memory": seq(S, B, False)},
    {"tgt_mask": mask("causal_float", T, T, B), "memory_key_padding_mask": padding("bool", B, S)})

# The whole Transformer: 2 encoder layers, 1 decoder layer.
for name, bf, nf in [("transformer_post", False, False), ("transformer_pre_bf", True, True)]:
    m = tnn.Transformer(D, H, num_encoder_layers=2, num_decoder_layers=1, **opts("relu", bf, nf))
    add(name, "transformer", m, cfg("relu", bf, nf, encoder_layers=2, decoder_layers=1),
        {"src": seq(S, B, bf), "tgt": seq(T, B, bf)},
        {"src_mask": mask("causal_bool", S, S, B), "tgt_mask": mask("causal_float", T, T, B),
         "src_key_padding_mask": padding("bool", B, S), "tgt_key_padding_mask": padding("bool", B, T),
         "memory_key_padding_mask": padding("bool", B, S)})

out = write("torch_transformer.json", cases, newline=False)
print("wrote %d cases to %s" % (len(cases), out))
