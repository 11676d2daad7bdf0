#!/usr/bin/env python3
"""Per-sample gradients of the seeds' MLP: tcomp against torch.func, in one run.

    python3 bench/per_sample.py [--threads 1,2] [--rounds 3] [--min-time 1]
        [--tcomp build/tcomp] [--json OUT]

Each sample's gradients of its own loss with respect to every parameter, for
a batch of 128 of the 784-128-10 MLP with ReLU and softmax cross-entropy
(bench/per_sample.tc): 128 x 101,770 floats, 52 MB written.  The contenders:

  tcomp     the def `tcomp grad bench/per_sample.tc -e mlp_xent --wrt
            W1,B1,W2,B2 --per-sample B` prints (forward, loss and per-sample
            backward in one def, nothing saved), timed by `tcomp bench
            --no-cache --threads N --json` (its inputs random, d_L too)
  vmap      torch.func.vmap(grad(loss of one sample)) over the batch, the
            parameters shared (in_dims None; the recipe of the torch.func
            documentation), in bench/.venv's PyTorch, torch.set_num_threads(N)
  write     the floor: glibc's memset of a non-zero byte over a 52 MB
            buffer faulted in beforehand, with as many threads
            (bench/write_floor.c, build/bench_write), the time it takes to
            write the gradients once (not zeros: this host writes zeros in
            half the time of other values)
  stream    the same bytes written by a loop of streaming stores, as many
            threads (bench_write's nt figure): what a vectorised kernel's
            stores can reach (glibc's memset is faster on the Zen 5 host)

Rounds alternate the contenders per thread count, so that load on the
machine falls on all; a cell is the minimum (and the median) over the rounds
of each contender's minimum (median) time.  Each contender runs in a fresh
process with bench/compare.py's environment.  See bench/README.md.
"""

import argparse
import ctypes
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import compare  # noqa: E402  (the machine's description and environments)

B, I, H, K = 128, 784, 128, 10
SHAPES = {"X": [B, I], "W1": [H, I], "B1": [H], "W2": [K, H], "B2": [K], "Y": [B], "d_L": [B]}
GRAD_BYTES = 4 * B * (H * I + H + K * H + K)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run_tcomp(tcomp, src, threads, min_time):
    """(min ms, median ms) of one tcomp bench run of the per-sample def."""
    cmd = [tcomp, "bench", src, "--no-cache", "--threads", str(threads), "--json",
           "--min-time", str(min_time)]
    for name, shape in SHAPES.items():
        cmd += ["--shape", f"{name}={'x'.join(map(str, shape))}"]
    p = subprocess.run(cmd, env=compare.env_for(threads), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    res = compare.json_line(p.stdout)
    if p.returncode or res is None:
        raise SystemExit(f"per_sample.py: tcomp bench failed:\n{p.stderr}")
    return res["min_ms"], res["median_ms"]


def torch_worker(threads, min_time):
    """In bench/.venv's Python: time vmap(grad) and print (min, median) ms."""
    import warnings
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    import torch
    import torch.nn.functional as F
    from torch.func import functional_call, grad, vmap

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(I, H), torch.nn.ReLU(), torch.nn.Linear(H, K))
    params = {k: v.detach() for k, v in model.named_parameters()}
    x = torch.rand(B, I) * 2 - 1
    y = torch.randint(0, K, (B,))

    def loss1(p, xs, ys):
        return F.cross_entropy(functional_call(model, p, (xs[None],)), ys[None])

    per_sample = vmap(grad(loss1), in_dims=(None, 0, 0))
    g = per_sample(params, x, y)
    assert g["0.weight"].shape == (B, H, I)
    for _ in range(5):
        per_sample(params, x, y)
    times, start = [], time.perf_counter()
    while len(times) < 10 or time.perf_counter() - start < min_time:
        t0 = time.perf_counter()
        per_sample(params, x, y)
        times.append(1e3 * (time.perf_counter() - t0))
    print(json.dumps({"min_ms": min(times), "median_ms": statistics.median(times),
                      "runs": len(times), "torch": torch.__version__}))


def run_torch(threads, min_time):
    py = os.path.join(HERE, ".venv", "bin", "python")
    p = subprocess.run([py, os.path.abspath(__file__), "--worker", str(threads),
                        "--min-time", str(min_time)], env=compare.env_for(threads),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    res = compare.json_line(p.stdout)
    if p.returncode or res is None:
        raise SystemExit(f"per_sample.py: the torch worker failed:\n{p.stderr[-2000:]}")
    return res["min_ms"], res["median_ms"], res["torch"]


def time_write(write, threads, reps=30):
    """(min, median) ms of writing the gradients' bytes (bench/write_floor.c):
    glibc's memset of a non-zero byte over a buffer faulted in first, the
    threads each filling a slice.  Not zeros: this host writes zeros in
    about half the time of any other value (bench/write_floor.c)."""
    p = subprocess.run([write, str(GRAD_BYTES), str(threads), str(reps)], env=compare.env_for(threads),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    res = compare.json_line(p.stdout)
    if p.returncode or res is None:
        raise SystemExit(f"per_sample.py: {write} failed:\n{p.stderr}")
    return (res["min_ms"], res["median_ms"]), (res["nt_min_ms"], res["nt_median_ms"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--min-time", type=float, default=1.0,
                    help="seconds of timed runs per contender and round (default 1)")
    ap.add_argument("--tcomp", default=os.path.join(ROOT, "build", "tcomp"))
    ap.add_argument("--write", default=os.path.join(ROOT, "build", "bench_write"),
                    help="bench/write_floor.c's program (default build/bench_write)")
    ap.add_argument("--json", metavar="OUT")
    ap.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        torch_worker(a.worker, a.min_time)
        return 0
    threads = [int(t) for t in a.threads.split(",") if t]
    started = datetime.datetime.now(datetime.timezone.utc)
    with tempfile.TemporaryDirectory(prefix="tcomp-per-sample-") as tmp:
        src = os.path.join(tmp, "per_sample_grad.tc")
        p = subprocess.run([a.tcomp, "grad", os.path.join(HERE, "per_sample.tc"), "-e",
                            "mlp_xent", "--wrt", "W1,B1,W2,B2", "--per-sample", "B", "-o", src],
                           stderr=subprocess.PIPE, text=True)
        if p.returncode:
            raise SystemExit(f"per_sample.py: tcomp grad failed:\n{p.stderr}")
        cells, torch_version = {}, "?"
        for rnd in range(a.rounds):
            for t in threads:
                log(f"round {rnd + 1}/{a.rounds}, {t} thread(s)")
                cells.setdefault(("tcomp", t), []).append(run_tcomp(a.tcomp, src, t, a.min_time))
                mn, med, torch_version = run_torch(t, a.min_time)
                cells.setdefault(("vmap", t), []).append((mn, med))
                wr, nt = time_write(a.write, t)
                cells.setdefault(("write", t), []).append(wr)
                cells.setdefault(("stream", t), []).append(nt)
    rows = []
    for t in threads:
        row = {"threads": t}
        for who in ("tcomp", "vmap", "write", "stream"):
            row[who] = {"min_ms": min(c[0] for c in cells[(who, t)]),
                        "median_ms": statistics.median(c[1] for c in cells[(who, t)])}
        rows.append(row)
    print(f"{compare.machine()}\n{started:%Y-%m-%d %H:%M} UTC; torch {torch_version}; "
          f"{a.rounds} rounds; per-sample gradients of a batch of {B} ({GRAD_BYTES / 1e6:.1f} MB)\n")
    print(f"{'threads':>7} {'tcomp ms':>9} {'vmap(grad) ms':>14} {'write ms':>9} {'stream ms':>10} "
          f"{'vmap/tcomp':>11} {'tcomp/write':>12} {'tcomp/stream':>13}   (minimum; median in brackets)")
    for r in rows:
        tc, vm, wr, st = r["tcomp"], r["vmap"], r["write"], r["stream"]
        print(f"{r['threads']:>7} {tc['min_ms']:9.2f} {vm['min_ms']:14.2f} {wr['min_ms']:9.2f} "
              f"{st['min_ms']:10.2f} {vm['min_ms'] / tc['min_ms']:10.2f}x "
              f"{tc['min_ms'] / wr['min_ms']:11.2f}x {tc['min_ms'] / st['min_ms']:12.2f}x"
              f"   ({tc['median_ms']:.2f}, {vm['median_ms']:.2f}, {wr['median_ms']:.2f}, "
              f"{st['median_ms']:.2f})")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"date": f"{started:%Y-%m-%d %H:%M} UTC", "machine": compare.machine(),
                       "command": " ".join(sys.argv), "torch": torch_version, "rows": rows},
                      f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
