#!/usr/bin/env python3
"""Every compilation stage of every def, for comparing two builds of tcomp.

    python3 bench/emit_stages.py OUT_DIR [--tcomp PATH] [--jobs N] [--quick] [--threads N] [FILE.tc ...]
    python3 bench/emit_stages.py --compare OLD_TCOMP NEW_TCOMP [--jobs N] [--quick] [--threads N]
        [FILE.tc ...]
    python3 bench/emit_stages.py --diff OLD_DIR NEW_DIR

A refactoring must leave the generated code as it was (or explain each
difference).  This script runs `tcomp emit` for every def of the given files
(default: tests/corpus/*.tc, bench/kernels.tc, examples/*.tc):

  - parametric stages (syntax, ir, canonical, schedule, ast, c), once per def;
  - for two automatic size sets (small odd sizes; sizes of 32 to 128) and, for
    bench/kernels.tc, the shapes of bench/baselines.c's table: the stages ir,
    schedule, ast, c and llvm with the default options, and schedule and llvm
    under each option set of OPTION_SETS (fusion, tiling, vectorisation,
    fast-math, parallel loops, sharing, packing...).

Each output (or tcomp's error text, when a stage fails: that is behaviour
too) goes to OUT_DIR/<file>/<def>/<sizes>/<options>.<stage>.  With --compare
the script writes both builds' outputs under a temporary folder, lists every
file that differs with the first differing lines, and exits 1 when any does;
--diff does the same for two folders written earlier (a baseline kept from
before a change, say).  The full set takes about 12 minutes per build on
two cores (--quick: default options only).  --threads N compiles the
concrete stages for N threads (`--option threads=N`; without it `tcomp emit`
compiles for one thread, the threads option's auto with no context).
"""

import argparse
import concurrent.futures
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile

BENCH = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH)

PARAMETRIC = ["syntax", "ir", "canonical", "schedule", "ast", "c"]
CONCRETE = ["ir", "schedule", "ast", "c", "llvm"]
VARIANT_STAGES = ["schedule", "llvm"]

# name -> list of --option NAME=VALUE
OPTION_SETS = {
    "fusion_min": ["fusion=min"],
    "fusion_p3c": ["fusion=preserve3coincident"],
    "untiled": ["tile=none", "regtile=none", "order=off"],
    "tiles": ["tile=16,8,4", "regtile=2,8", "unroll=off", "interchange=1,0"],
    "scalar": ["vector=1", "unroll_inner=1", "vecreduce=off", "stream=off"],
    "fast": ["fastmath=on", "vector=8", "unroll_inner=4"],
    "parallel": ["parallel=on", "threads=2"],
    "rewrites_off": ["pack=off", "inline=off", "share=off"],
    "share_row": ["share=row", "contract=on"],
}

# Size values by order of first appearance; sizes of filter windows (K..)
# get the last value, which is small.
SIZE_SETS = {
    "small": [7, 13, 5, 11, 9, 6, 4, 3],
    "mid": [64, 96, 128, 48, 32, 40, 24, 3],
}

# The shapes of bench/baselines.c's table, per def of bench/kernels.tc.
BENCH_SHAPES = {
    "matmul": {"A": [1024, 1024], "B": [1024, 1024]},
    "matmul_nt": {"A": [1024, 1024], "B": [1024, 1024]},
    "batch_matmul": {"X": [500, 26, 72], "Y": [500, 72, 26]},
    "conv2d": {"I": [8, 64, 56, 56], "W1": [64, 64, 3, 3], "B": [64]},
    "softmax": {"I": [4096, 4096]},
    "layernorm": {"X": [4096, 1024], "G": [1024], "Bt": [1024]},
    "fcrelu": {"In": [128, 784], "W": [128, 784], "Bias": [128]},
    "kronecker3": {"W0": [16, 16], "W1": [16, 16], "W2": [16, 16], "X": [256, 16, 16, 16]},
    "mlp_fwd": {"X": [128, 784], "W1": [784, 128], "B1": [128], "W2": [128, 10], "B2": [10]},
    "mlp_bwd": {"X": [128, 784], "Hd": [128, 128], "P": [128, 10], "Y": [128],
                "W2": [128, 10]},
    "sgd": {"W1": [784, 128], "B1": [128], "W2": [128, 10], "B2": [10], "dW1": [784, 128],
            "dB1": [128], "dW2": [128, 10], "dB2": [10]},
    "wgrad": {"X": [128, 784], "dH": [128, 128]},
    "biasgrad": {"dH": [4096, 1024]},
    "group_conv": {"I": [32, 32, 16, 14, 14], "W1": [32, 16, 16, 3, 3], "B": [32, 16]},
    "depthwise": {"I": [8, 256, 56, 56], "W1": [256, 3, 3], "B": [256]},
    "attention": {"Q": [8, 256, 64], "K": [8, 256, 64], "V": [8, 256, 64]},
    "rmsnorm_res": {"X": [2048, 1024], "R": [2048, 1024], "G": [1024]},
    "layernorm_bwd": {"X": [4096, 1024], "dY": [4096, 1024], "G": [1024]},
}

SIG = re.compile(r"^def (\w+)\((.*?)\) ->")
PARAM = re.compile(r"(\w+)(?:\(([^()]*)\))? (\w+)")


def defs_of(tcomp, path):
    """[(name, [(tensor, [dim, ...]), ...]), ...] from `tcomp check`."""
    r = subprocess.run([tcomp, "check", path], capture_output=True, text=True)
    out = []
    for line in r.stdout.splitlines():
        m = SIG.match(line)
        if not m:
            continue
        ins = [(t, [d.strip() for d in dims.split(",")] if dims.strip() else [])
               for _, dims, t in PARAM.findall(m.group(2))]
        out.append((m.group(1), ins))
    return out


def shapes_for(ins, values):
    sizes, args = {}, []
    for t, dims in ins:
        shape = []
        for d in dims:
            if re.fullmatch(r"\d+", d):
                shape.append(int(d))
                continue
            if d not in sizes:
                small = d.startswith("K") and len(d) > 1
                sizes[d] = values[-1] if small else values[len(sizes) % (len(values) - 1)]
            shape.append(sizes[d])
        args += ["--shape", t + "=" + ("x".join(map(str, shape)) if shape else "scalar")]
    return args


def jobs_for(tcomp, files, quick, threads=None):
    """(output path relative to OUT_DIR, argv after the tcomp binary)."""
    targs = ["--option", f"threads={threads}"] if threads else []
    jobs = []
    for path in files:
        rel = os.path.relpath(path, REPO).replace("/", "_")
        for name, ins in defs_of(tcomp, path):
            base = [path, "-e", name]
            for st in PARAMETRIC:
                jobs.append((f"{rel}/{name}/parametric/default.{st}",
                             ["emit", *base, "--stage", st]))
            sets = {k: shapes_for(ins, v) for k, v in SIZE_SETS.items()}
            if path.endswith("bench/kernels.tc") and name in BENCH_SHAPES:
                sets["bench"] = [a for t, s in BENCH_SHAPES[name].items()
                                 for a in ("--shape", t + "=" + "x".join(map(str, s)))]
            for sname, shape_args in sets.items():
                for st in CONCRETE:
                    jobs.append((f"{rel}/{name}/{sname}/default.{st}",
                                 ["emit", *base, *shape_args, *targs, "--stage", st]))
                if quick:
                    continue
                for oname, opts in OPTION_SETS.items():
                    oargs = [a for o in opts for a in ("--option", o)] + targs
                    for st in VARIANT_STAGES:
                        jobs.append((f"{rel}/{name}/{sname}/{oname}.{st}",
                                     ["emit", *base, *shape_args, *oargs, "--stage", st]))
    return jobs


def run_one(tcomp, out_dir, job):
    rel, argv = job
    # a kernel cache that does not exist: the options are the defaults
    nocache = os.path.join(out_dir, "no-such-cache.sqlite")
    r = subprocess.run([tcomp, *argv], capture_output=True, text=True, cwd=REPO,
                       env={**os.environ, "TCOMP_CACHE": nocache})
    dest = os.path.join(out_dir, rel)
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    with open(dest, "w") as f:
        if r.returncode:
            f.write(f"exit {r.returncode}\n{r.stderr}")
        else:
            f.write(r.stdout)
    return r.returncode


def emit_all(tcomp, out_dir, files, jobs_n, quick, threads=None):
    jobs = jobs_for(tcomp, files, quick, threads)
    with concurrent.futures.ThreadPoolExecutor(jobs_n) as ex:
        codes = list(ex.map(lambda j: run_one(tcomp, out_dir, j), jobs))
    return len(jobs), sum(1 for c in codes if c)


def diff_dirs(old, new):
    """Print every output of new that old has otherwise (new may be a
    subset: a run on some files, or --quick); 1 if any differs or is
    missing from old."""
    differ = total = 0
    for root, _, names in sorted(os.walk(new)):
        for nm in sorted(names):
            if nm.endswith(".sqlite"):
                continue
            total += 1
            b = os.path.join(root, nm)
            rel = os.path.relpath(b, new)
            a = os.path.join(old, rel)
            ta = open(a).read().splitlines() if os.path.exists(a) else ["<missing>"]
            tb = open(b).read().splitlines()
            if ta != tb:
                differ += 1
                print(f"DIFFERS {rel}")
                for line in list(difflib.unified_diff(ta, tb, "old", "new", n=1,
                                                      lineterm=""))[:12]:
                    print("    " + line)
    print(f"{differ} of {total} output(s) differ", file=sys.stderr)
    return 1 if differ or not total else 0


def compare(old, new, files, jobs_n, quick, threads=None):
    tmp = tempfile.mkdtemp(prefix="tcomp-emit-")
    try:
        dirs = []
        for tag, exe in (("old", old), ("new", new)):
            d = os.path.join(tmp, tag)
            n, failed = emit_all(exe, d, files, jobs_n, quick, threads)
            print(f"{tag}: {exe}: {n} outputs, {failed} of them errors", file=sys.stderr)
            dirs.append(d)
        return diff_dirs(*dirs)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir", nargs="?")
    ap.add_argument("files", nargs="*")
    ap.add_argument("--tcomp", default=os.path.join(REPO, "build", "tcomp"))
    ap.add_argument("--compare", nargs=2, metavar=("OLD", "NEW"))
    ap.add_argument("--diff", nargs=2, metavar=("OLD_DIR", "NEW_DIR"),
                    help="compare two output folders written earlier")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--quick", action="store_true", help="default options only")
    ap.add_argument("--threads", type=int, help="compile the concrete stages for N threads")
    a = ap.parse_intermixed_args()
    if a.diff:
        sys.exit(diff_dirs(*a.diff))
    files = list(a.files)
    if a.compare and a.out_dir:  # with --compare, the positional arguments are files
        files.insert(0, a.out_dir)
    if not files:
        corpus = os.path.join(REPO, "tests", "corpus")
        files = sorted(os.path.join(corpus, f) for f in os.listdir(corpus) if f.endswith(".tc"))
        files.append(os.path.join(BENCH, "kernels.tc"))
        ex = os.path.join(REPO, "examples")
        files += sorted(os.path.join(ex, f) for f in os.listdir(ex) if f.endswith(".tc"))
    files = [os.path.abspath(f) for f in files]
    if a.compare:
        sys.exit(compare(os.path.abspath(a.compare[0]), os.path.abspath(a.compare[1]),
                         files, a.jobs, a.quick, a.threads))
    if not a.out_dir:
        ap.error("OUT_DIR or --compare OLD NEW is needed")
    n, failed = emit_all(os.path.abspath(a.tcomp), a.out_dir, files, a.jobs, a.quick, a.threads)
    print(f"{n} outputs in {a.out_dir}, {failed} of them errors", file=sys.stderr)


if __name__ == "__main__":
    main()
