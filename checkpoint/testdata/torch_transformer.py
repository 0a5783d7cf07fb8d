#!/usr/bin/python3
"""Writes torch_transformer.safetensors, the state dict of a PyTorch 1.13
torch.nn.Transformer(d_model=8, nhead=2, num_encoder_layers=2,
num_decoder_layers=1, dim_feedforward=8) with random float32 parameters
under PyTorch's own names, and torch_transformer_io.safetensors, an input
pair src [3, 2, 8], tgt [4, 2, 8] (PyTorch's [length, batch, d_model]) and
the module's eval-mode output y for them with a causal tgt_mask
(generate_square_subsequent_mask). mapping_transformer_test.go loads the
first into nn.Transformer with checkpoint.TorchTransformer and checks y.

The safetensors files are written by hand (the format is an 8-byte
little-endian header length, a JSON header, the raw data) since Debian's
python3-torch comes without the safetensors package. Run from the
repository root with /usr/bin/python3 checkpoint/testdata/torch_transformer.py
and commit the files.
"""
import json
import os
import struct

import torch

torch.manual_seed(0)
here = os.path.dirname(os.path.abspath(__file__))


def save(path, tensors):
    header, data, off = {}, b"", 0
    for name, t in tensors.items():
        b = t.detach().contiguous().to(torch.float32).numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        data += b
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


m = torch.nn.Transformer(8, 2, num_encoder_layers=2, num_decoder_layers=1, dim_feedforward=8).eval()
with torch.no_grad():
    for p in m.parameters():
        p.copy_(0.4 * torch.randn_like(p))
src, tgt = torch.randn(3, 2, 8), torch.randn(4, 2, 8)
with torch.enable_grad():  # PyTorch's math path, not the inference fast path
    y = m(src, tgt, tgt_mask=torch.nn.Transformer.generate_square_subsequent_mask(4))
save(os.path.join(here, "torch_transformer.safetensors"), m.state_dict())
save(os.path.join(here, "torch_transformer_io.safetensors"), {"src": src, "tgt": tgt, "y": y})
print(sorted(m.state_dict().keys())[:6], "...")
