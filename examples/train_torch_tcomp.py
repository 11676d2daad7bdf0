#!/usr/bin/env python3
"""Train the seeds' MLP from PyTorch with tcomp layers, next to torch.nn.Linear.

    PYTHONPATH=tools/python /usr/bin/python3 examples/train_torch_tcomp.py
        [--epochs 5] [--threads 1] [--seed 42] [--model layers|mlp] [--loss torch|tcomp]

The 784-128-10 perceptron with ReLU on Fashion-MNIST, softmax cross-entropy
(the mean over the batch), plain SGD with lr 0.1, batches of 128 rows (the
last one of an epoch partial: 469 steps), trained twice in one process:

  tcomp   the layers are tcomp defs wrapped in tcomp.TorchModule, their
          weights nn.Parameters; the backward passes are the ones tcomp
          derives from the defs (`tcomp grad`).  --model layers (default):
          two defs below, linear_relu and linear, one module per layer;
          --model mlp: the whole forward as one def, mlp of
          examples/train_mlp.tc, with its four parameters.  --loss torch
          (default): torch.nn.functional.cross_entropy on tcomp's logits;
          --loss tcomp: the def xent of examples/train_mlp.tc.
  torch   torch.nn.Sequential(Linear, ReLU, Linear) and cross_entropy.

Both start from the same weights (PyTorch's default initialisation after
torch.manual_seed(seed), copied into the tcomp modules), see the same
batches in the same order (the rows as tcomp's training runtime shuffles
them; bench/train_torch.py's data loading and epoch_orders are reused) and
step with torch.optim.SGD.  The epochs alternate, tcomp's then torch's, so
that a busy machine slows both alike.  Per epoch and model: the mean of the
steps' losses, the test accuracy on the 10000 test images, and the wall time
of the training loop (batch gather, forward, loss, backward, SGD step).
Epoch 1 of tcomp includes compiling its kernels: the forward and the
derived backward for batches of 128 and of 96 (the last batch); the test
accuracy's kernel (batch 10000) is compiled outside the timed loop.  At
the end, how far the two models' weights drifted apart (the largest
||W_tcomp - W_torch|| / ||W_torch|| over the four tensors): rounding
differs (tcomp's sums in another order, fused multiply-adds), so the two
runs part slowly, as two runs of PyTorch on different BLAS would.

Runs with Debian's python3-torch and python3-numpy; the data is Debian's
dataset-fashion-mnist (/usr/share/datasets/fashion-mnist).  See
docs/python.md ("Training from PyTorch") and docs/performance.md ("Python
call overhead", a run's epoch times).
"""

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "bench"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

try:
    import tcomp
except ImportError:  # not installed: the checkout's package (it finds build/libtcomp.so)
    sys.path.insert(1, os.path.join(ROOT, "tools", "python"))
    import tcomp
from train_torch import BATCH, HIDDEN, LR, MASK64, epoch_orders, load  # noqa: E402

# One fully connected layer, weights stored (out, in) as nn.Linear stores them.
LAYERS = """
def linear_relu(float(B,I) X, float(O,I) W, float(O) Bias) -> (Y) {
    Y(b,o) +=! X(b,r_i) * W(o,r_i)
    Y(b,o) = fmax(Y(b,o) + Bias(o), 0)
}

def linear(float(B,I) X, float(O,I) W, float(O) Bias) -> (Y) {
    Y(b,o) +=! X(b,r_i) * W(o,r_i)
    Y(b,o) = Y(b,o) + Bias(o)
}
"""


def param(t):
    """A copy of one of the reference model's tensors, to become an nn.Parameter."""
    return t.detach().clone()


def tcomp_model(kind, ref):
    """The tcomp model with the reference model's weights: a torch.nn.Module
    whose forward(X) gives the logits."""
    l1, l2 = ref[0], ref[2]
    if kind == "layers":
        m = tcomp.define(LAYERS, filename="<train_torch_tcomp.py>")
        return torch.nn.Sequential(
            tcomp.TorchModule(m.linear_relu, {"W": param(l1.weight), "Bias": param(l1.bias)}),
            tcomp.TorchModule(m.linear, {"W": param(l2.weight), "Bias": param(l2.bias)}))
    mlp = tcomp.load(os.path.join(HERE, "train_mlp.tc"), name="mlp")
    return tcomp.TorchModule(mlp, {"W1": param(l1.weight), "B1": param(l1.bias),
                                   "W2": param(l2.weight), "B2": param(l2.bias)})


def accuracy(model, x, y):
    with torch.no_grad():
        return (model(x).argmax(1) == y).sum().item() / len(y)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epochs", type=int, default=5, help="epochs (default 5)")
    ap.add_argument("--threads", type=int, default=1,
                    help="threads of both torch and tcomp (default 1; 0: one per CPU)")
    ap.add_argument("--seed", type=int, default=42,
                    help="shuffle and initialisation seed (default 42; 0: no shuffle)")
    ap.add_argument("--model", choices=("layers", "mlp"), default="layers",
                    help="tcomp's model: one def per layer (default) or the whole mlp def")
    ap.add_argument("--loss", choices=("torch", "tcomp"), default="torch",
                    help="tcomp's loss: torch's cross_entropy (default) or the xent def")
    a = ap.parse_args()
    if a.epochs < 1:
        raise SystemExit("train_torch_tcomp.py: --epochs: expected at least 1")
    if a.threads < 0:
        raise SystemExit("train_torch_tcomp.py: --threads: expected 0 or more")
    if not 0 <= a.seed <= MASK64:
        raise SystemExit("train_torch_tcomp.py: --seed: expected an integer in [0, 2^64)")

    threads = a.threads or os.cpu_count()
    torch.set_num_threads(threads)
    tcomp.set_threads(a.threads)
    x_train, y_train = load(torch, "train")
    x_test, y_test = load(torch, "t10k")
    steps = -(-len(x_train) // BATCH)
    orders = torch.tensor(epoch_orders(len(x_train), a.seed, a.epochs))
    batches = [order.split(BATCH) for order in orders]

    torch.manual_seed(a.seed)
    ref = torch.nn.Sequential(torch.nn.Linear(x_train.shape[1], HIDDEN), torch.nn.ReLU(),
                              torch.nn.Linear(HIDDEN, 10))
    net = tcomp_model(a.model, ref)
    xent = tcomp.load(os.path.join(HERE, "train_mlp.tc"), name="xent")
    loss_of = {"torch": F.cross_entropy, "tcomp": xent}
    contenders = [("tcomp", net, loss_of[a.loss]), ("torch", ref, F.cross_entropy)]
    opts = {name: torch.optim.SGD(m.parameters(), lr=LR) for name, m, _ in contenders}

    print(f"784-{HIDDEN}-10 MLP, {a.epochs} epochs of {steps} steps (batch {BATCH}, SGD lr "
          f"{LR}), seed {a.seed}, {threads} thread(s); torch {torch.__version__}, "
          f"tcomp {tcomp.__version__}\n"
          f"tcomp: {'linear_relu + linear defs' if a.model == 'layers' else 'the mlp def'} "
          f"in tcomp.TorchModule, loss {'cross_entropy' if a.loss == 'torch' else 'xent def'}; "
          "torch: nn.Linear, cross_entropy", flush=True)
    acc = {}
    for e in range(a.epochs):
        for name, model, loss_fn in contenders:
            opt, losses = opts[name], []
            t0 = time.perf_counter()
            for idx in batches[e]:
                x, y = x_train.index_select(0, idx), y_train.index_select(0, idx)
                opt.zero_grad()
                loss = loss_fn(model(x), y)
                loss.backward()
                opt.step()
                losses.append(loss.detach())
            sec = time.perf_counter() - t0
            acc[name] = accuracy(model, x_test, y_test)
            print(f"epoch {e + 1} {name:5}: loss {torch.stack(losses).double().mean().item():.4f}, "
                  f"test accuracy {100 * acc[name]:.2f}%, {sec:.3f} s", flush=True)
    drift = max(((p - q).norm() / q.norm()).item()
                for p, q in zip(net.parameters(), ref.parameters()))
    print(f"after {a.epochs} epochs: test accuracy tcomp {100 * acc['tcomp']:.2f}%, torch "
          f"{100 * acc['torch']:.2f}% (difference {100 * (acc['tcomp'] - acc['torch']):+.2f} "
          f"points); weights apart by at most {drift:.2e} of a tensor's norm")
    return 0


if __name__ == "__main__":
    sys.exit(main())
