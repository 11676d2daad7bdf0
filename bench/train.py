#!/usr/bin/env python3
"""Training the seeds' MLP: tcomp's training runtime against PyTorch, in one run.

    python3 bench/train.py [--epochs 5] [--threads 1,2] [--rounds 2]
        [--modes eager,compile] [--ensemble K] [--drop-last] [--tcomp build] [--json OUT]

The same setting on both sides (bench/train_torch.py says it in full): the
784-128-10 MLP with ReLU, softmax cross-entropy, SGD lr 0.1, batches of 128
in the order tc_batches draws from seed 42 (the last batch of an epoch
partial, 96 rows: 469 steps; --drop-last skips it on both sides: 468),
Fashion-MNIST from Debian's dataset-fashion-mnist.
tcomp's side is build/train_mlp (examples/train_mlp.c: its epoch time is the
steps and the batch copies, as PyTorch's is its steps and the batch
gathers); PyTorch's is bench/train_torch.py (eager, and torch.compile of the
model) from bench/.venv.  Rounds alternate the contenders (tcomp, then each
PyTorch mode, per thread count) so that load on the machine falls on all;
per contender the best and the median epoch time over epochs 2..N of every
round, and the test accuracy after the last epoch (of the first round).

--ensemble K trains K such models at once: tcomp's as one ensemble
(train_mlp --ensemble K: tc_model_ensemble), PyTorch's as K sequential
models (mode eager) and as torch.func's vmap over their stacked parameters
(mode vmap; modes default to eager,vmap then); the loss and the test
accuracy are the means over the K models.
"""

import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import compare  # noqa: E402  (the machine's description and environments)

EPOCH = re.compile(r"epoch (\d+): loss ([0-9.]+), test accuracy ([0-9.]+)%, ([0-9.]+) s")


def run_tcomp(build, threads, epochs, ensemble, drop_last):
    """Epoch times, losses and accuracies of one train_mlp run."""
    p = subprocess.run([os.path.join(build, "train_mlp"), "--epochs", str(epochs),
                        "--threads", str(threads), "--ensemble", str(ensemble)]
                       + (["--drop-last"] if drop_last else []),
                       env=compare.env_for(threads),
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    rows = [m.groups() for m in EPOCH.finditer(p.stdout)]
    if p.returncode or len(rows) != epochs:
        raise SystemExit(f"train.py: train_mlp at {threads} threads failed:\n{p.stdout}")
    return {"epoch_s": [float(r[3]) for r in rows], "loss": [float(r[1]) for r in rows],
            "test_acc": float(rows[-1][2]) / 100}


def run_torch(mode, threads, epochs, ensemble, drop_last):
    """The same from bench/train_torch.py (a fresh process per run)."""
    py = os.path.join(HERE, ".venv", "bin", "python")
    out = os.path.join("/tmp", f"tcomp-train-{os.getpid()}.json")
    p = subprocess.run([py, os.path.join(HERE, "train_torch.py"), "--epochs", str(epochs),
                        "--threads", str(threads), "--modes", mode, "--json", out,
                        "--ensemble", str(ensemble)] + (["--drop-last"] if drop_last else []),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if p.returncode:
        raise SystemExit(f"train.py: train_torch.py {mode} at {threads} threads failed")
    with open(out) as f:
        r = json.load(f)["results"][0]
    os.remove(out)
    return {"epoch_s": r["epoch_s"], "loss": r["loss"], "test_acc": r["final_test_acc"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--modes", help="PyTorch's modes (default eager,compile; with --ensemble "
                    "eager,vmap)")
    ap.add_argument("--ensemble", type=int, default=0, metavar="K",
                    help="train K models at once (default 0: one model)")
    ap.add_argument("--tcomp", default=os.path.join(ROOT, "build"),
                    help="the build directory holding train_mlp (default build)")
    ap.add_argument("--drop-last", action="store_true",
                    help="skip the partial last batch of each epoch on both sides (468 steps)")
    ap.add_argument("--json", metavar="OUT")
    a = ap.parse_args()
    threads = [int(t) for t in a.threads.split(",")]
    modes = [m for m in (a.modes or ("eager,vmap" if a.ensemble else "eager,compile")).split(",")
             if m]
    started = datetime.datetime.now(datetime.timezone.utc)
    runs = {}
    for rnd in range(a.rounds):
        for t in threads:
            for who in ["tcomp"] + [f"torch {m}" for m in modes]:
                print(f"round {rnd + 1}/{a.rounds}: {who}, {t} thread(s)", file=sys.stderr)
                r = (run_tcomp(a.tcomp, t, a.epochs, a.ensemble, a.drop_last) if who == "tcomp"
                     else run_torch(who.split()[1], t, a.epochs, a.ensemble, a.drop_last))
                runs.setdefault((who, t), []).append(r)
    rows = []
    for (who, t), rs in runs.items():
        later = [s for r in rs for s in (r["epoch_s"][1:] or r["epoch_s"])]
        rows.append({"who": who, "threads": t, "best_s": min(later),
                     "median_s": statistics.median(later), "test_acc": rs[0]["test_acc"],
                     "loss_last": rs[0]["loss"][-1], "epochs": [r["epoch_s"] for r in rs]})
    what = f"; an ensemble of {a.ensemble} models" if a.ensemble else ""
    print(f"{compare.machine()}\n{started:%Y-%m-%d %H:%M} UTC; {a.rounds} rounds of "
          f"{a.epochs} epochs ({468 if a.drop_last else 469} steps each){what}, best and "
          f"median over epochs "
          f"2..{a.epochs}\n")
    print(f"{'contender':>15} {'threads':>7} {'best s':>8} {'median s':>9} {'vs tcomp':>9} "
          f"{'test acc':>9}")
    for r in rows:
        base = next(x for x in rows if x["who"] == "tcomp" and x["threads"] == r["threads"])
        print(f"{r['who']:>15} {r['threads']:>7} {r['best_s']:8.3f} {r['median_s']:9.3f} "
              f"{r['median_s'] / base['median_s']:8.2f}x {100 * r['test_acc']:8.2f}%")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"date": f"{started:%Y-%m-%d %H:%M} UTC", "machine": compare.machine(),
                       "ensemble": a.ensemble,
                       "command": " ".join(sys.argv), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
