#!/usr/bin/env python3
"""The cost of calling a tcomp op from Python, against torch and NumPy ops of the same size.

    PYTHONPATH=tools/python /usr/bin/python3 bench/py_call.py [--rounds 500] [--calls 100]
        [--threads 1] [--only add,matmul] [--tcomp build/tcomp] [--json OUT]

Ops small enough that the call is most of the time: a pointwise add of two
float32 vectors of 1, 64 and 4096 elements, and a float32 matmul of n x n
by n x n for n = 1, 8, 64 (outputs of 1, 64 and 4096 elements), each a def
of its own module (so compiled for its shapes alone, default options, no
kernel cache).  Contenders per case, all in this process:

  torch            torch.add(A, B) / torch.matmul(A, B) on torch tensors
  torch out=       the same writing into a tensor passed with out=
  tcomp            op(A, B) on the same torch tensors (tcomp allocates the
                   output with torch.zeros)
  tcomp out=       op(A, B, out=C) into an existing torch tensor
  numpy, numpy out=, tcomp, tcomp out=
                   the same four on NumPy arrays (np.add, np.matmul)
  ctypes           tc_kernel_run called through ctypes on DLTensors and
                   pointer arrays built once beforehand (the package's
                   internals tcomp._core and tcomp._tensor): what a call
                   costs without the package's per-call Python
  empty            the timing loop calling a lambda that does nothing: the
                   share of every other cell that is the loop's own
and, from `tcomp bench --json` (a separate process, once per case): the
kernel alone, timed in C ("C run").

Timing: one sample is a block of --calls calls of one contender, timed with
time.perf_counter_ns, divided by the calls; a round takes one sample of
every contender of every case, the order rotated from round to round, so
that load on the machine falls on all alike; the tables give the median
and the minimum over the rounds, in microseconds per call, and the ratio of
tcomp's median to the framework op's.  Python's garbage collector is off
while a block runs (as timeit does).  Every contender's output is checked
against NumPy once before timing.

The process runs with bench/compare.py's environment (GLIBC_TUNABLES, the
BLAS thread variables: it starts itself again with them when they are
missing), torch.set_num_threads and tcomp.set_threads at --threads (default 1).
The cores that other processes used on average during each round (from
/proc, as compare.py counts them) are recorded: the header gives their
median and maximum, the share of rounds above compare.BUSY.  --json OUT
writes every sample.  Run it with an interpreter that has NumPy and torch
(Debian's /usr/bin/python3 with python3-numpy and python3-torch).  See
bench/README.md; docs/performance.md, "Python call overhead".
"""

import argparse
import datetime
import gc
import json
import os
import shlex
import statistics
import sys
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
import compare  # noqa: E402  (the machine's description, environment and load)

DEFS = {
    "add": "def add(float(N) A, float(N) B) -> (C) {\n    C(i) = A(i) + B(i)\n}\n",
    "matmul": "def matmul(float(M,K) A, float(K,N) B) -> (C) {\n"
              "    C(m,n) +=! A(m,r_k) * B(r_k,n)\n}\n",
}
SIZES = {"add": [1, 64, 4096], "matmul": [1, 8, 64]}   # add: N; matmul: M = K = N
CONTENDERS = ["torch", "tcomp_torch", "torch_out", "tcomp_torch_out",
              "numpy", "tcomp_numpy", "numpy_out", "tcomp_numpy_out", "ctypes", "empty"]
PAIRS = [("tcomp_torch", "torch"), ("tcomp_torch_out", "torch_out"),
         ("tcomp_numpy", "numpy"), ("tcomp_numpy_out", "numpy_out")]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def shapes(op, n):
    """The input shapes of a case and its output's element count."""
    return ([(n,), (n,)], n) if op == "add" else ([(n, n), (n, n)], n * n)


def c_run(tcomp_exe, op, n, threads):
    """The kernel alone from `tcomp bench --json` (default options, no
    cache): {"median_us", "min_us"}, or {"error": ...}."""
    path = os.path.join("/tmp", f"tcomp-py-call-{os.getpid()}-{op}.tc")
    with open(path, "w") as f:
        f.write(DEFS[op])
    (sa, sb), _ = shapes(op, n)
    cmd = [tcomp_exe, "bench", path, "-e", op, "--shape", "A=" + "x".join(map(str, sa)),
           "--shape", "B=" + "x".join(map(str, sb)), "--threads", str(threads), "--no-cache",
           "--min-time", "0.5", "--json"]
    rc, out, err = compare.run(cmd, env=compare.env_for(threads))
    os.remove(path)
    res = compare.json_line(out)
    if rc != 0 or not res or "median_ms" not in res:
        return {"error": compare.first_line(err or out)}
    return {"median_us": 1e3 * res["median_ms"], "min_us": 1e3 * res["min_ms"],
            "runs": res.get("runs")}


def make_case(tcomp, np, torch, op_name, n, rng):
    """The contenders of one case as {name: callable}, each checked once
    against NumPy; a contender that cannot run is left out with its reason
    in the second result."""
    (sa, sb), _ = shapes(op_name, n)
    an = rng.uniform(-1, 1, sa).astype(np.float32)
    bn = rng.uniform(-1, 1, sb).astype(np.float32)
    want = an + bn if op_name == "add" else an @ bn
    at, bt = torch.from_numpy(an.copy()), torch.from_numpy(bn.copy())
    ct, cn, cc = torch.zeros(want.shape), np.zeros(want.shape, np.float32), \
        np.zeros(want.shape, np.float32)
    op = tcomp.define(DEFS[op_name], name=op_name, filename=f"<py_call {op_name} {n}>")
    tf, nf = (torch.add, np.add) if op_name == "add" else (torch.matmul, np.matmul)
    fns = {
        "torch": lambda: tf(at, bt),
        "tcomp_torch": lambda: op(at, bt),
        "torch_out": lambda: tf(at, bt, out=ct),
        "tcomp_torch_out": lambda: op(at, bt, out=ct),
        "numpy": lambda: nf(an, bn),
        "tcomp_numpy": lambda: op(an, bn),
        "numpy_out": lambda: nf(an, bn, out=cn),
        "tcomp_numpy_out": lambda: op(an, bn, out=cn),
        "empty": lambda: None,
    }
    missing = {}
    try:  # the package's internals: the floor of a call through ctypes
        from tcomp import _core, _lib, _tensor
        k = op.compile(an, bn)
        keep = [_tensor.as_arg(an, "A"), _tensor.as_arg(bn, "B"),
                _tensor.as_arg(cc, "C", writable=True)]
        ins, outs = _core._pointer_array(keep[:2]), _core._pointer_array(keep[2:])
        run, h = _lib.tc_kernel_run, k._handle()

        def ctypes_call(keep=keep):
            return run(h, ins, 2, outs, 1)
        fns["ctypes"] = ctypes_call
    except Exception as e:  # noqa: BLE001 - internals changed: leave the row out
        missing["ctypes"] = f"{type(e).__name__}: {e}"
    for name, fn in list(fns.items()):
        ct.zero_()
        cn[...] = 0
        cc[...] = 0
        got = fn()
        if name == "empty":
            continue
        if name == "ctypes":
            if got != 0:
                raise SystemExit(f"py_call.py: {op_name} {n}: tc_kernel_run returned {got}")
            got = cc
        elif name.endswith("_out"):
            got = ct if "torch" in name else cn
        got = got.numpy() if isinstance(got, torch.Tensor) else np.asarray(got)
        if got.shape != want.shape or not np.allclose(got, want, rtol=1e-5, atol=1e-5):
            raise SystemExit(f"py_call.py: {op_name} {n}: {name} disagrees with NumPy")
    return fns, missing


def block(fn, calls):
    """Microseconds per call of calls calls of fn, the collector off."""
    gc.disable()
    t0 = time.perf_counter_ns()
    for _ in range(calls):
        fn()
    t = time.perf_counter_ns() - t0
    gc.enable()
    return t / calls / 1e3


def cell(s):
    return "n/a" if s is None else f"{s['median']:.2f} ({s['min']:.2f})"


def ratio(s, base):
    return "n/a" if s is None or base is None else f"{s['median'] / base['median']:.2f}x"


def tables(cases, stats, crun):
    out = []
    for fw, title in (("torch", "torch tensors"), ("numpy", "NumPy arrays")):
        fop = {"add": f"{fw}.add" if fw == "torch" else "np.add",
               "matmul": f"{fw}.matmul" if fw == "torch" else "np.matmul"}
        out.append(f"On {title}: microseconds per call, median (min) over the rounds; ratio: "
                   "tcomp's median over the framework op's\n")
        out.append(f"| op | output elements | {fw} op | tcomp | ratio | {fw} op, out= | "
                   "tcomp, out= | ratio |")
        out.append("|---|---|---|---|---|---|---|---|")
        for op, n in cases:
            s = stats[(op, n)]
            _, elems = shapes(op, n)
            size = f"{n}" if op == "add" else f"{elems} ({n}x{n}x{n})"
            out.append(f"| {fop[op]} | {size} | {cell(s.get(fw))} | {cell(s.get('tcomp_' + fw))}"
                       f" | {ratio(s.get('tcomp_' + fw), s.get(fw))} | {cell(s.get(fw + '_out'))}"
                       f" | {cell(s.get('tcomp_' + fw + '_out'))} | "
                       f"{ratio(s.get('tcomp_' + fw + '_out'), s.get(fw + '_out'))} |")
        out.append("")
    out.append("Floors: microseconds per call, median (min)\n")
    out.append("| op | output elements | kernel alone (`tcomp bench`, C) | tc_kernel_run through "
               "ctypes, arguments built once | empty lambda in the timing loop |")
    out.append("|---|---|---|---|---|")
    for op, n in cases:
        s, c = stats[(op, n)], crun[(op, n)]
        cc = (f"{c['median_us']:.2f} ({c['min_us']:.2f})" if "median_us" in c
              else f"n/a: {c['error']}")
        out.append(f"| {op} | {shapes(op, n)[1]} | {cc} | {cell(s.get('ctypes'))} | "
                   f"{cell(s.get('empty'))} |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="See bench/README.md.")
    ap.add_argument("--rounds", type=int, default=500,
                    help="rounds: samples per contender and case (default 500)")
    ap.add_argument("--calls", type=int, default=100,
                    help="calls timed together as one sample (default 100)")
    ap.add_argument("--threads", type=int, default=1,
                    help="threads of torch, tcomp and the BLAS (default 1)")
    ap.add_argument("--only", default="add,matmul", help="add, matmul or both (default both)")
    ap.add_argument("--tcomp", default=os.environ.get("TCOMP") or
                    os.path.join(REPO, "build", "tcomp"),
                    help="the tcomp binary for the C-run column (default build/tcomp)")
    ap.add_argument("--seed", type=int, default=1, help="the inputs' random seed (default 1)")
    ap.add_argument("--json", metavar="OUT", help="write every sample to OUT")
    a = ap.parse_args()
    if a.rounds < 1 or a.calls < 1 or a.threads < 1:
        raise SystemExit("py_call.py: --rounds, --calls and --threads: expected at least 1")
    ops = [o for o in a.only.split(",") if o]
    if not ops or any(o not in DEFS for o in ops):
        raise SystemExit(f"py_call.py: --only {a.only}: expected add, matmul or both")

    env = compare.env_for(a.threads)
    if any(os.environ.get(k) != env.get(k) for k in ("GLIBC_TUNABLES", "OMP_NUM_THREADS",
                                                     "OPENBLAS_NUM_THREADS")):
        os.execve(sys.executable, [sys.executable, os.path.abspath(__file__), *sys.argv[1:]],
                  env)

    import warnings
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    import numpy as np
    import torch
    import tcomp
    from torch_bench import info

    torch.set_num_threads(a.threads)
    tcomp.set_threads(a.threads)
    tcomp.set_cache("")   # the defaults, never a tuned entry
    rng = np.random.default_rng(a.seed)
    cases = [(op, n) for op in ops for n in SIZES[op]]
    started = datetime.datetime.now(datetime.timezone.utc)
    load_before = open("/proc/loadavg").read().split()[:3]
    log("py_call.py: kernels alone (tcomp bench)")
    crun = {c: c_run(a.tcomp, *c, a.threads) for c in cases}
    log("py_call.py: compiling and checking")
    fns, missing = {}, {}
    for c in cases:
        fns[c], missing[c] = make_case(tcomp, np, torch, *c, rng)
    order = [(c, name) for c in cases for name in CONTENDERS if name in fns[c]]
    for c, name in order:   # warm-up: every contender's first calls untimed
        block(fns[c][name], a.calls)
    samples = {k: [] for k in order}
    others = []
    t_start = time.perf_counter()
    for r in range(a.rounds):
        s0 = compare.cpu_sample()
        shift = r % len(order)
        for c, name in order[shift:] + order[:shift]:
            samples[(c, name)].append(block(fns[c][name], a.calls))
        others.append(compare.others_cores(s0, compare.cpu_sample()))
        if (r + 1) % max(1, a.rounds // 10) == 0:
            log(f"py_call.py: round {r + 1}/{a.rounds}, {time.perf_counter() - t_start:.0f} s")
    stats = {c: {} for c in cases}
    for (c, name), v in samples.items():
        stats[c][name] = {"median": statistics.median(v), "min": min(v)}
    busy = sum(o > compare.BUSY for o in others)
    meta = {
        "date": f"{started:%Y-%m-%d %H:%M} UTC",
        "machine": compare.machine(),
        "commit": compare.git("rev-parse", "--short", "HEAD"),
        "package_changes": compare.git("status", "--porcelain", "--", "tools/python/tcomp",
                                       strip=False),
        "command": " ".join(shlex.quote(x) for x in ["PYTHONPATH=tools/python", "/usr/bin/python3",
                                                      "bench/py_call.py", *sys.argv[1:]]),
        "python": sys.version.split()[0], "numpy": np.__version__, "torch": info(torch),
        "tcomp_library": tcomp.library_path, "threads": a.threads, "rounds": a.rounds,
        "calls": a.calls, "load_before": load_before,
        "load_after": open("/proc/loadavg").read().split()[:3],
        "others_cores": {"median": statistics.median(others), "max": max(others),
                         "rounds_busy": busy},
        "env": {k: v for k, v in env.items() if k in ("GLIBC_TUNABLES", "OPENBLAS_CORETYPE")},
    }
    t = meta["torch"]
    dirty = (" (the package with uncommitted changes: "
             f"{', '.join(l[3:] for l in meta['package_changes'].splitlines())})"
             if meta["package_changes"] else "")
    print(f"{meta['machine']}\n{meta['date']}, commit {meta['commit']}{dirty}; "
          f"Python {meta['python']}, "
          f"NumPy {meta['numpy']}, torch {t['version']} (BLAS {t['blas']}, CPU capability "
          f"{t['cpu_capability']}); {a.threads} thread(s); load average "
          f"{' '.join(load_before)} before, {' '.join(meta['load_after'])} after\n"
          f"{a.rounds} rounds of {a.calls} calls per contender and case, alternating; other "
          f"processes used {meta['others_cores']['median']:.2f} cores (median over the rounds), "
          f"{meta['others_cores']['max']:.2f} at most, above {compare.BUSY} in {busy} of "
          f"{a.rounds} rounds\n{meta['command']}\n")
    print(tables(cases, stats, crun))
    for c, m in missing.items():
        for name, why in m.items():
            print(f"\n{c[0]} {c[1]}: {name} not measured: {why}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({**meta, "results": [
                {"op": c[0], "n": c[1], "output_elements": shapes(*c)[1], "c_run": crun[c],
                 "contenders": {name: {**stats[c][name], "samples_us": samples[(c, name)]}
                                for name in CONTENDERS if (c, name) in samples},
                 "missing": missing[c]} for c in cases]}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
