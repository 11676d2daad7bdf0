#!/usr/bin/env python3
"""make demo's Python step: a def called on NumPy arrays and torch tensors
through the tcomp package (tools/python, docs/python.md), its gradient
derived by tcomp and checked against PyTorch's."""

import numpy as np
import torch

import tcomp

lang = """
def linear_relu(float(B,I) X, float(O,I) W, float(O) Bias) -> (Y) {
    Y(b,o) +=! X(b,r_i) * W(o,r_i)
    Y(b,o) = fmax(Y(b,o) + Bias(o), 0)
}
"""
layer = tcomp.define(lang, name="linear_relu")
print(layer, "from", tcomp.library_path)

rng = np.random.default_rng(0)
X = rng.standard_normal((4, 6), dtype=np.float32)
W = rng.standard_normal((3, 6), dtype=np.float32)
b = rng.standard_normal(3, dtype=np.float32)
Y = layer(X, W, b)  # NumPy in, NumPy out
print("NumPy: Y =\n", Y)
print("max |Y - numpy| =", np.abs(Y - np.maximum(X @ W.T + b, 0)).max())

Wt = torch.from_numpy(W).requires_grad_()
bt = torch.from_numpy(b).requires_grad_()
Yt = layer(torch.from_numpy(X), Wt, bt)  # torch in, torch out, differentiable
Yt.square().sum().backward()  # the backward def tcomp derived (tcomp grad)
Wr, br = Wt.detach().clone().requires_grad_(), bt.detach().clone().requires_grad_()
torch.relu(torch.from_numpy(X) @ Wr.T + br).square().sum().backward()
print("torch: max |dW - PyTorch's| =", (Wt.grad - Wr.grad).abs().max().item(),
      " max |dBias - PyTorch's| =", (bt.grad - br.grad).abs().max().item())
print("the derived backward def:\n" + layer.grad(["W", "Bias"]))
