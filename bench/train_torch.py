#!/usr/bin/env python3
"""PyTorch's side of the training benchmark: an MLP on Fashion-MNIST.

    bench/.venv/bin/python bench/train_torch.py [--epochs 5] [--threads 1,2]
        [--modes eager,compile] [--seed 42] [--ensemble K] [--drop-last] [--json OUT]
    bench/.venv/bin/python bench/train_torch.py --check-order [--seed 42]

The setting tcomp's training runtime is compared with: Fashion-MNIST from
Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist), images
scaled to [0, 1] by /255 and flattened to 784; Linear(784, 128), ReLU,
Linear(128, 10) with PyTorch's default initialisation after
torch.manual_seed(seed); softmax cross-entropy, the mean over the batch;
plain SGD, lr 0.1; batches of 128 rows, the last one of an epoch partial
(96 rows: 469 steps, as DataLoader gives by default; --drop-last skips it:
468 steps, as tcomp's train_mlp --drop-last).  The rows come in tcomp's order (epoch_orders below), so
both sides train on the same batches.

Timed, per epoch, with time.perf_counter: the training loop alone, that is
for every step the batch gathered from the tensors loaded beforehand by
index, forward, loss, backward and optimizer step.  Not timed: loading the
data, the permutations (computed for all epochs first), the test accuracy
after each epoch (the eager model on the 10000 test images).  The modes:

  eager    the model as it is
  compile  torch.compile of the model (default inductor backend and mode):
           its forward and, through AOTAutograd, its backward are compiled;
           the loss and the SGD step stay eager.  The first step compiles
           (with a fresh, empty inductor cache, so the compile is cold); its
           time is reported as "first step".

With --ensemble K, K such models (initialised one after the other from the
seed) train on the same batches, each its own SGD; the loss is the mean of
theirs, the test accuracy the mean of theirs.  The modes then:

  eager    the K models one after the other, each step (forward, loss,
           backward, optimizer step) as above: K sequential models
  vmap     torch.func: the K models' parameters stacked
           (stack_module_state), one step computes every model's
           gradients with vmap(grad(loss of functional_call)) over the
           stacked parameters (the batch shared: in_dims None) and updates
           them in place, p -= lr * g (the ensembling recipe of the
           torch.func documentation)

Epoch 1 is a warm-up in every mode (the compile, the first touch of the
allocator's pages): "best" and "median" are over epochs 2..N (epoch 1 when
there is only one).  The loss of an epoch is the mean of its steps' losses.

Each (mode, thread count) runs in a fresh process with bench/compare.py's
environment (GLIBC_TUNABLES, OPENBLAS_CORETYPE on AVX-512 hosts, the thread
variables) and torch.set_num_threads(N).  The cores that other processes
used on average during each epoch (from /proc, as compare.py counts them)
are recorded; the table shows the largest as "others max": on 2 cores, a
busy core slows the 2-thread runs many times over.  --json OUT writes every
number.  --check-order prints the first 10 row indices of epochs 1 and 2,
to check tcomp's shuffle against.
See bench/README.md.
"""

import argparse
import datetime
import gzip
import json
import os
import shlex
import statistics
import struct
import subprocess
import sys
import tempfile
import time

import compare

DATA = "/usr/share/datasets/fashion-mnist"
BATCH = 128
LR = 0.1
HIDDEN = 128
MASK64 = (1 << 64) - 1


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def epoch_orders(n, seed, epochs):
    """The row order of every epoch, as tcomp's training runtime draws it.

    Fisher-Yates over a xorshift64* stream (state = seed, nonzero): each
    epoch shuffles the file order 0..n-1 afresh, the stream going on where
    it stopped (include/tcomp.h, tc_batches); seed 0 keeps the rows in file
    order."""
    s, orders = seed, []
    for _ in range(epochs):
        perm = list(range(n))
        if seed:
            for i in range(n - 1, 0, -1):
                s ^= s >> 12
                s = (s ^ (s << 25)) & MASK64
                s ^= s >> 27
                j = ((s * 0x2545F4914F6CDD1D) & MASK64) % (i + 1)
                perm[i], perm[j] = perm[j], perm[i]
        orders.append(list(perm))
    return orders


def read_idx(torch, name):
    """An IDX file of unsigned bytes (two zero bytes, type 0x08, the rank,
    big-endian uint32 extents, the data) as a uint8 tensor."""
    with gzip.open(os.path.join(DATA, name)) as f:
        data = f.read()
    if data[:3] != b"\x00\x00\x08":
        raise SystemExit(f"train_torch.py: {name}: not an IDX file of unsigned bytes")
    rank = data[3]
    shape = struct.unpack(f">{rank}I", data[4:4 + 4 * rank])
    return torch.frombuffer(bytearray(data), dtype=torch.uint8,
                            offset=4 + 4 * rank).reshape(shape)


def load(torch, split):
    """(images as float32 rows of 784 in [0, 1], labels as int64) of a split."""
    images = read_idx(torch, f"{split}-images-idx3-ubyte.gz")
    labels = read_idx(torch, f"{split}-labels-idx1-ubyte.gz")
    return images.reshape(len(images), -1).float().div(255), labels.long()


def make_step_ensemble(torch, F, mode, k, seed, x_train, y_train):
    """The step of an ensemble of k models (mode eager: k sequential models,
    vmap: torch.func over the stacked parameters) and the test accuracy:
    step(idx) -> the mean loss, accuracy(x, y) -> the mean of the models'."""
    torch.manual_seed(seed)
    models = [torch.nn.Sequential(torch.nn.Linear(x_train.shape[1], HIDDEN), torch.nn.ReLU(),
                                  torch.nn.Linear(HIDDEN, 10)) for _ in range(k)]
    if mode == "eager":
        opts = [torch.optim.SGD(m.parameters(), lr=LR) for m in models]

        def step(idx):
            x, y = x_train.index_select(0, idx), y_train.index_select(0, idx)
            losses = []
            for m, opt in zip(models, opts):
                opt.zero_grad()
                loss = F.cross_entropy(m(x), y)
                loss.backward()
                opt.step()
                losses.append(loss.detach())
            return torch.stack(losses).mean()

        def accuracy(x, y):
            with torch.no_grad():
                return sum((m(x).argmax(1) == y).sum().item() for m in models) / (k * len(y))
        return step, accuracy
    import copy
    from torch.func import functional_call, grad, stack_module_state, vmap
    params, buffers = stack_module_state(models)
    base = copy.deepcopy(models[0]).to("meta")

    def loss_fn(p, b, x, y):
        loss = F.cross_entropy(functional_call(base, (p, b), (x,)), y)
        return loss, loss.detach()

    grads_of = vmap(grad(loss_fn, has_aux=True), in_dims=(0, 0, None, None))
    logits_of = vmap(lambda p, b, x: functional_call(base, (p, b), (x,)), in_dims=(0, 0, None))

    def step(idx):
        x, y = x_train.index_select(0, idx), y_train.index_select(0, idx)
        grads, losses = grads_of(params, buffers, x, y)
        with torch.no_grad():
            for name, g in grads.items():
                params[name].sub_(LR * g)
        return losses.mean()

    def accuracy(x, y):
        with torch.no_grad():
            return (logits_of(params, buffers, x).argmax(2) == y).sum().item() / (k * len(y))
    return step, accuracy


def train(mode, threads, epochs, seed, ensemble=0, drop_last=False):
    """Train once in this process; the measurements as a dict."""
    import warnings
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    import torch
    import torch.nn.functional as F
    from torch_bench import info

    torch.set_num_threads(threads)
    x_train, y_train = load(torch, "train")
    x_test, y_test = load(torch, "t10k")
    steps = len(x_train) // BATCH if drop_last else -(-len(x_train) // BATCH)
    orders = torch.tensor(epoch_orders(len(x_train), seed, epochs))
    batches = [order[:steps * BATCH].split(BATCH) for order in orders]

    if ensemble:
        step, accuracy = make_step_ensemble(torch, F, mode, ensemble, seed, x_train, y_train)
    else:
        torch.manual_seed(seed)
        model = torch.nn.Sequential(torch.nn.Linear(x_train.shape[1], HIDDEN), torch.nn.ReLU(),
                                    torch.nn.Linear(HIDDEN, 10))
        opt = torch.optim.SGD(model.parameters(), lr=LR)
        net = torch.compile(model) if mode == "compile" else model

        def step(idx):
            x, y = x_train.index_select(0, idx), y_train.index_select(0, idx)
            opt.zero_grad()
            loss = F.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
            return loss.detach()

        def accuracy(x, y):
            with torch.no_grad():
                return (model(x).argmax(1) == y).sum().item() / len(y)

    epoch_s, loss, acc, others, first_step_s = [], [], [], [], None
    for e in range(epochs):
        losses = []
        cpu0 = compare.cpu_sample()
        t0 = time.perf_counter()
        for idx in batches[e]:
            losses.append(step(idx))
            if first_step_s is None:
                first_step_s = time.perf_counter() - t0
        epoch_s.append(time.perf_counter() - t0)
        others.append(compare.others_cores(cpu0, compare.cpu_sample()))
        loss.append(torch.stack(losses).double().mean().item())
        acc.append(accuracy(x_test, y_test))
        log(f"{mode} threads={threads} epoch {e + 1}/{epochs}: {epoch_s[-1]:.3f} s, "
            f"loss {loss[-1]:.4f}, test accuracy {acc[-1]:.4f}, others {others[-1]:.2f} cores")
    steady = epoch_s[1:] or epoch_s
    return {"mode": mode, "threads": threads, "ensemble": ensemble,
            "torch_threads": torch.get_num_threads(),
            "compiled": "model (forward and backward)" if mode == "compile" else None,
            "steps_per_epoch": steps, "epoch_s": epoch_s, "first_step_s": first_step_s,
            "best_epoch_s": min(steady), "median_epoch_s": statistics.median(steady),
            "loss": loss, "test_acc": acc, "final_test_acc": acc[-1],
            "others_cores": others, "torch_version": torch.__version__, "torch": info(torch)}


def run_worker(mode, threads, a):
    """One (mode, thread count) in a fresh process with compare.py's
    environment and an empty inductor cache; its result."""
    with tempfile.TemporaryDirectory(prefix="tcomp-train-inductor-") as cache:
        env = compare.env_for(threads)
        env["TORCHINDUCTOR_CACHE_DIR"] = cache
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", mode,
                            "--threads", str(threads), "--epochs", str(a.epochs),
                            "--seed", str(a.seed), "--ensemble", str(a.ensemble)]
                           + (["--drop-last"] if a.drop_last else []),
                           env=env, stdout=subprocess.PIPE, text=True)
    res = compare.json_line(p.stdout)
    if p.returncode != 0 or res is None:
        raise SystemExit(f"train_torch.py: {mode} at {threads} threads failed (exit "
                         f"{p.returncode})")
    return res


def table(results):
    head = ["mode", "threads", "epoch 1 s", "first step s", "best s", "median s",
            "ms/step", "loss first → last", "test acc", "others max"]
    rows = [[r["mode"], str(r["threads"]), f"{r['epoch_s'][0]:.3f}", f"{r['first_step_s']:.3f}",
             f"{r['best_epoch_s']:.3f}", f"{r['median_epoch_s']:.3f}",
             f"{1e3 * r['median_epoch_s'] / r['steps_per_epoch']:.3f}",
             f"{r['loss'][0]:.4f} → {r['loss'][-1]:.4f}", f"{100 * r['final_test_acc']:.2f}%",
             f"{max(r['others_cores']):.2f}"] for r in results]
    width = [max(len(c) for c in col) for col in zip(head, *rows)]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(row, width))
                     for row in [head] + rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="See bench/README.md.")
    ap.add_argument("--epochs", type=int, default=5, help="epochs (default 5)")
    ap.add_argument("--threads", default="1,2", help="thread counts (default 1,2)")
    ap.add_argument("--modes", default="eager,compile",
                    help="eager, compile or both (default eager,compile)")
    ap.add_argument("--seed", type=int, default=42,
                    help="shuffle and initialisation seed (default 42; 0: no shuffle)")
    ap.add_argument("--ensemble", type=int, default=0, metavar="K",
                    help="train K models at once (modes eager: K sequential models, vmap: "
                         "torch.func over their stacked parameters)")
    ap.add_argument("--drop-last", action="store_true",
                    help="skip the partial last batch of an epoch (468 steps, not 469)")
    ap.add_argument("--json", metavar="OUT", help="write every measurement to OUT")
    ap.add_argument("--check-order", action="store_true",
                    help="print the first 10 row indices of epochs 1 and 2 and stop")
    ap.add_argument("--worker", choices=("eager", "compile", "vmap"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if not 0 <= a.seed <= MASK64:
        raise SystemExit("train_torch.py: --seed: expected an integer in [0, 2^64)")
    if a.epochs < 1:
        raise SystemExit("train_torch.py: --epochs: expected at least 1")

    if a.check_order:
        for e, order in enumerate(epoch_orders(60000, a.seed, 2)):
            print(f"seed {a.seed} epoch {e + 1}: {' '.join(map(str, order[:10]))}")
        return 0
    if a.worker:
        # The result goes on its own copy of stdout; anything else written
        # there (by torch, by the compilers inductor runs) goes to stderr.
        out = os.fdopen(os.dup(1), "w")
        os.dup2(2, 1)
        out.write(json.dumps(train(a.worker, int(a.threads), a.epochs, a.seed, a.ensemble,
                                   a.drop_last)) + "\n")
        out.close()
        return 0

    try:
        threads = [int(t) for t in a.threads.split(",") if t]
        assert threads and all(t >= 1 for t in threads)
    except (ValueError, AssertionError):
        raise SystemExit(f"train_torch.py: --threads {a.threads}: expected numbers like 1,2")
    modes = [m for m in a.modes.split(",") if m]
    allowed = ("eager", "vmap") if a.ensemble else ("eager", "compile")
    if a.ensemble < 0:
        raise SystemExit("train_torch.py: --ensemble: expected at least 0")
    if not modes or any(m not in allowed for m in modes):
        raise SystemExit(f"train_torch.py: --modes {a.modes}: expected {' or '.join(allowed)}"
                         f"{' with --ensemble' if a.ensemble else ''}, or both")

    started = datetime.datetime.now(datetime.timezone.utc)
    load_before = open("/proc/loadavg").read().split()[:3]
    results = [run_worker(m, t, a) for t in threads for m in modes]
    meta = {
        "date": f"{started:%Y-%m-%d %H:%M} UTC",
        "machine": compare.machine(),
        "load_before": load_before, "load_after": open("/proc/loadavg").read().split()[:3],
        "command": " ".join(shlex.quote(x) for x in ["bench/.venv/bin/python",
                                                      "bench/train_torch.py", *sys.argv[1:]]),
        "torch": results[0]["torch"],
        "env": {k: v for k, v in compare.env_for(1).items()
                if k in ("GLIBC_TUNABLES", "OPENBLAS_CORETYPE")},
        "setting": {"epochs": a.epochs, "seed": a.seed, "batch": BATCH, "lr": LR,
                    "ensemble": a.ensemble, "drop_last": a.drop_last,
                    "model": f"784-{HIDDEN}-10 MLP, ReLU", "data": DATA},
    }
    t = meta["torch"]
    print(f"{meta['machine']}\n{meta['date']}; torch {t['version']} (BLAS {t['blas']}, "
          f"CPU capability {t['cpu_capability']}); load average {' '.join(load_before)} "
          f"before, {' '.join(meta['load_after'])} after\n"
          f"{a.epochs} epochs of {results[0]['steps_per_epoch']} steps, seed {a.seed}; best and "
          f"median over {f'epochs 2..{a.epochs}' if a.epochs > 1 else 'epoch 1'}; first step: "
          "in compile mode torch.compile's (cold) compile and one step; others max: the most cores "
          f"other processes used during an epoch (above {compare.BUSY}: its times are suspect)\n")
    print(table(results))
    if a.json:
        for r in results:
            del r["torch"]
        with open(a.json, "w") as f:
            json.dump({**meta, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
