#!/usr/bin/env python3
"""Reductions on a block's threads or on a warp's lanes (polyhedral/gpu.c, the reduce
and reduce_map options).

    python3 tests/test_gpu_reduce.py TCOMP NPYGEN [--nvrtc]

For row sums, a matvec, a dot product, a full sum, softmax's row max and sum
(fusion=min, and the default fusion, whose fused row loop the gpu-fusion step
splits), a row min, an integer row sum and an integer row max: the CUDA text (`tcomp
emit --stage cuda`) maps the reduction to a block or to a warp per row (the
kernel comment says which) and combines with __shfl_down_sync (the warp form
with no __syncthreads and no shared memory), and the emulator (target=cuda-emu,
which also reports races and divergent barriers and shuffles) gives the
interpreter's outputs on random inputs (npygen, outputs poisoned by the run) at
reduced lengths that are not multiples of 32 (1, 7, 31, 33, 40, 45, 1000), with
1024 threads for 33 values (most threads' shares empty) and reduce=off as the
serial control.  The warp form runs matvec 4100x40 under the defaults, and
small cases under reduce_map=warp: rows not a multiple of the 8 rows of a
block (a ragged last block), more rows than the grid (grid=2: each warp
takes several rows in turn), fewer rows than 8
(a block of 3 warps), rows over 3 loops (blocks of y and z too, capped by
grid=1,2,1), a reduced loop shorter than a warp under reduce=on.  The
automatic rule is pinned on the launch configuration of large cases without
running them (LAUNCH): a warp per row from 4096 rows, a block below,
reduce_threads=32 keeps the warp and 64 a block, column sums (rows already
the stride-1 walk) and matmul_nt (a contraction, whose operands all rows
share) a thread per row, softmax 8192x1000 under the default fusion split
into six kernels, its max and sum a warp per row, and a full sum (no rows) a
block under reduce_map=warp.  With --nvrtc, NVRTC compiles two of the warp
form's cases (float, int8) for sm_90 and sm_80.  Exits 1 listing every failure.
"""

import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_cuda_files as tcf  # noqa: E402  (read_npy, same, run)

CORPUS = os.path.join(HERE, "corpus")
# Reductions the corpus lacks: a row min, a row max of integers, column sums.
LOCAL_TC = """
def row_min(float(N,M) A) -> (O) {
    O(i) min=! A(i,j)
}
def row_max_int(int32(N,M) A) -> (O) {
    O(i) max=! A(i,j)
}
def col_sum(float(N,M) A) -> (S) {
    S(j) +=! A(i,j)
}
def batch3_max(float(A,B,N,M) X) -> (S) {
    S(a,b,n) max=! X(a,b,n,m)
}
"""
LOCAL = "local.tc"  # written into the temporary directory
# (file, def, {input: shape}, outputs, extra options, mapped: "block", "warp",
# False (serial) or None (not checked))
CASES = [
    ("reductions.tc", "sum_all", {"A": "1x1"}, ["s"], [], False),
    ("reductions.tc", "sum_all", {"A": "3x31"}, ["s"], [], False),
    ("reductions.tc", "sum_all", {"A": "2x33"}, ["s"], ["reduce_threads=1024"], "block"),
    ("reductions.tc", "sum_all", {"A": "3x1000"}, ["s"], [], "block"),
    ("reductions.tc", "sum_all", {"A": "3x31"}, ["s"], ["reduce=on"], "block"),
    ("matvec.tc", "matvec", {"A": "5x33", "x": "33"}, ["y"], [], "block"),
    ("matvec.tc", "matvec", {"A": "3x1000", "x": "1000"}, ["y"], ["reduce_threads=64"], "block"),
    ("matvec.tc", "matvec", {"A": "3x1000", "x": "1000"}, ["y"], ["reduce=off"], False),
    ("matvec.tc", "dot", {"a": "1000", "b": "1000"}, ["s"], [], "block"),
    ("softmax.tc", "softmax_outputs", {"I": "4x1000"}, ["O", "mx", "sm"], ["fusion=min"], "block"),
    ("softmax.tc", "softmax_outputs", {"I": "3x33"}, ["O", "mx", "sm"],
     ["fusion=min", "reduce_threads=1024"], "block"),
    # the default fusion: the gpu-fusion step splits the fused row loop
    ("softmax.tc", "softmax_outputs", {"I": "4x1000"}, ["O", "mx", "sm"], [], "block"),
    ("softmax.tc", "softmax_outputs", {"I": "5x33"}, ["O", "mx", "sm"], [], "block"),
    ("reductions.tc", "int8_sum", {"A": "3x1000"}, ["S", "W"], [], "block"),
    ("argmin.tc", "argmax_int", {"A": "7x13"}, ["mx", "idx"], ["fusion=min", "reduce=on"], None),
    ("reductions.tc", "min_of_sums", {"A": "3x100", "B": "3x100"}, ["O"], [], None),
    # the automatic rule end to end: 4100 rows, a warp each (512 blocks of 8 rows
    # and a ragged one of 4)
    ("matvec.tc", "matvec", {"A": "4100x40", "x": "40"}, ["y"], [], "warp"),
    # a warp per row, 8 rows a block: 21 rows (2 full blocks and a ragged one of 5)
    (LOCAL, "row_min", {"A": "21x45"}, ["O"], ["reduce_map=warp"], "warp"),
    # 37 rows on 2 blocks: each warp takes rows 16 apart in turn (grid-stride),
    # the last sweep ragged
    ("matvec.tc", "matvec", {"A": "37x40", "x": "40"}, ["y"], ["reduce_map=warp", "grid=2"],
     "warp"),
    # a reduced loop of 7 values (reduce=on): lanes 7 to 31 add the identity
    ("matvec.tc", "matvec", {"A": "13x7", "x": "7"}, ["y"], ["reduce=on", "reduce_map=warp"],
     "warp"),
    # the default fusion split, the max and the sum each a warp per row
    ("softmax.tc", "softmax_outputs", {"I": "11x33"}, ["O", "mx", "sm"], ["reduce_map=warp"],
     "warp"),
    # 3 rows: a block of 3 warps
    (LOCAL, "row_max_int", {"A": "3x100"}, ["O"], ["reduce_map=warp"], "warp"),
    # rows over three loops (the outer two on blocks of y and z), under a grid cap
    # that makes y wrap
    (LOCAL, "batch3_max", {"X": "2x3x5x40"}, ["S"], ["reduce_map=warp", "grid=1,2,1"], "warp"),
    ("reductions.tc", "int8_sum", {"A": "9x50"}, ["S", "W"], ["reduce_map=warp"], "warp"),
]
# The warp form's cases that NVRTC compiles (with --nvrtc): float and int8.
NVRTC_DEFS = {"softmax_outputs", "int8_sum"}
DTYPES = {"int8_sum": "int8", "argmax_int": "int32", "row_max_int": "int32"}

# The automatic rule on large shapes, from the launch configuration alone:
# (file, def, {input: shape}, extra options, [(grid, block, form) of each kernel
# with a reduction, in order], kernels in all (None: not checked)).
W8 = "(32, 8, 1)"
LAUNCH = [
    ("matvec.tc", "matvec", {"A": "4096x32", "x": "32"}, [], [("(512, 1, 1)", W8, "warp")], 1),
    ("matvec.tc", "matvec", {"A": "4095x32", "x": "32"}, [],
     [("(4095, 1, 1)", "(32, 1, 1)", "block")], 1),
    ("matvec.tc", "matvec", {"A": "4096x31", "x": "31"}, [], [], 1),
    ("matvec.tc", "matvec", {"A": "4096x32", "x": "32"}, ["reduce_threads=32"],
     [("(512, 1, 1)", W8, "warp")], 1),
    ("matvec.tc", "matvec", {"A": "4096x32", "x": "32"}, ["reduce_threads=64"],
     [("(4096, 1, 1)", "(64, 1, 1)", "block")], 1),
    ("matvec.tc", "matvec", {"A": "4096x32", "x": "32"}, ["reduce_map=block"],
     [("(4096, 1, 1)", "(32, 1, 1)", "block")], 1),
    ("matvec.tc", "matvec", {"A": "100003x64", "x": "64"}, [], [("(12501, 1, 1)", W8, "warp")], 1),
    (LOCAL, "col_sum", {"A": "100x8192"}, [], [], 1),
    # a contraction: no operand is a row's own (tiles, not a warp per element)
    ("matmul.tc", "matmul_nt", {"A": "64x96", "B": "128x96"}, [], [], 1),
    (LOCAL, "col_sum", {"A": "100x8192"}, ["reduce_map=warp"], [("(1024, 1, 1)", W8, "warp")], 1),
    # no rows: one reduction, on a block whatever reduce_map says
    ("reductions.tc", "sum_all", {"A": "3x100"}, ["reduce_map=warp"],
     [("(1, 1, 1)", "(128, 1, 1)", "block")], None),
    ("softmax.tc", "softmax", {"I": "8192x1000"}, [],
     [("(1024, 1, 1)", W8, "warp"), ("(1024, 1, 1)", W8, "warp")], 6),
    ("softmax.tc", "softmax", {"I": "8192x1000"}, ["reduce=off"], [], 1),
]
KERNEL = re.compile(r"/\* kernel \d+: grid (\([^)]*\)), block (\([^)]*\))([^*]*)\*/")


def emit(tcomp, path, name, shape_args, opts, stage="cuda", arch=None):
    cmd = [tcomp, "emit", path, "-e", name, "--stage", stage, *shape_args,
           "--option", "target=cuda", *opts]
    if arch:
        cmd += ["--option", "gpu_arch=" + arch]
    return tcf.run(cmd)


def form_of(comment):
    if "a warp per row" in comment:
        return "warp"
    return "block" if "a reduction on the threads in x" in comment else False


def check_launch(tcomp, tmp, failures):
    for f, name, shapes, extra, want, nk in LAUNCH:
        path = os.path.join(tmp if f == LOCAL else CORPUS, f)
        what = f"{f} {name} {shapes} {' '.join(extra)} (launch)"
        opts = [a for o in extra for a in ("--option", o)]
        shape_args = [a for t, s in shapes.items() for a in ("--shape", f"{t}={s}")]
        code, text = emit(tcomp, path, name, shape_args, opts)
        if code:
            failures.append(f"{what}: emit failed:\n{text}")
            continue
        kernels = KERNEL.findall(text)
        got = [(g, b, form_of(c)) for g, b, c in kernels if form_of(c)]
        if got != want:
            failures.append(f"{what}: reductions launched as {got}, expected {want}")
        if nk is not None and len(kernels) != nk:
            failures.append(f"{what}: {len(kernels)} kernels, expected {nk}")


def main():
    tcomp, npygen = sys.argv[1], sys.argv[2]
    nvrtc = "--nvrtc" in sys.argv[3:]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, LOCAL), "w") as fh:
            fh.write(LOCAL_TC)
        check_launch(tcomp, tmp, failures)
        for n, (f, name, shapes, outs, extra, mapped) in enumerate(CASES):
            path = os.path.join(tmp if f == LOCAL else CORPUS, f)
            what = f"{f} {name} {shapes} {' '.join(extra)}"
            opts = []
            for o in extra:
                opts += ["--option", o]
            shape_args = []
            for t, s in shapes.items():
                shape_args += ["--shape", f"{t}={s}"]
            code, text = emit(tcomp, path, name, shape_args, opts)
            if code:
                failures.append(f"{what}: emit failed:\n{text}")
                continue
            forms = {form_of(c) for _, _, c in KERNEL.findall(text)} - {False}
            form = "warp" if "warp" in forms else "block" if forms else False
            if mapped is not None and form != mapped:
                failures.append(f"{what}: mapped to {form or 'one thread per row'}, "
                                f"expected {mapped}")
            if form and "__shfl_down_sync" not in text:
                failures.append(f"{what}: no __shfl_down_sync in the CUDA text")
            if form == "warp" and forms == {"warp"} and (
                    "__syncthreads" in text or "TC_SHARED(" in text.split("#endif", 1)[-1]):
                failures.append(f"{what}: a warp per row with a barrier or shared memory")
            if nvrtc and form == "warp" and name in NVRTC_DEFS:
                for arch in ("sm_90", "sm_80"):
                    c, out = emit(tcomp, path, name, shape_args, opts, "cuda-resources", arch)
                    if c or "ptxas info" not in out:
                        failures.append(f"{what} [NVRTC {arch}]:\n{out}")
            results = tcf.interp_and_emulator(tcomp, npygen, tmp, str(n), path, name, shapes,
                                              outs, opts, DTYPES.get(name, "float32"),
                                              n * 7 + 1, failures, what)
            if len(results) == 2:
                for o, g, w in zip(outs, results["cuda-emu"], results["interp"]):
                    diff = tcf.same(g, w)
                    if diff:
                        failures.append(f"{what}: output {o} differs from the interpreter's: "
                                        f"{diff}")
    for f in failures:
        print("FAIL:", f)
    print(f"{len(CASES)} cases, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
