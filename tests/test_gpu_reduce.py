#!/usr/bin/env python3
"""Reductions on a block's threads (polyhedral/gpu.c, the reduce option).

    python3 tests/test_gpu_reduce.py TCOMP NPYGEN

For row sums, a matvec, a dot product, a full sum, softmax's row max and sum
(fusion=min, and the default fusion, whose fused row loop the gpu-fusion step
splits), an integer row sum and an integer row max: the CUDA text (`tcomp emit --stage
cuda`) maps the reduction to a block (a kernel comment says so) and combines
with __shfl_down_sync, and the emulator (target=cuda-emu) gives the
interpreter's outputs on random inputs (npygen, outputs poisoned by the run)
at reduced lengths that are not multiples of 32 (1, 31, 33, 1000), with
1024 threads for 33 values (most threads' shares empty) and reduce=off as
the serial control.  Exits 1 listing every failure.
"""

import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_cuda_files as tcf  # noqa: E402  (read_npy, same, run)

CORPUS = os.path.join(HERE, "corpus")
# (file, def, {input: shape}, outputs, extra options, mapped to a block)
CASES = [
    ("reductions.tc", "sum_all", {"A": "1x1"}, ["s"], [], False),
    ("reductions.tc", "sum_all", {"A": "3x31"}, ["s"], [], False),
    ("reductions.tc", "sum_all", {"A": "2x33"}, ["s"], ["reduce_threads=1024"], True),
    ("reductions.tc", "sum_all", {"A": "3x1000"}, ["s"], [], True),
    ("reductions.tc", "sum_all", {"A": "3x31"}, ["s"], ["reduce=on"], True),
    ("matvec.tc", "matvec", {"A": "5x33", "x": "33"}, ["y"], [], True),
    ("matvec.tc", "matvec", {"A": "3x1000", "x": "1000"}, ["y"], ["reduce_threads=64"], True),
    ("matvec.tc", "matvec", {"A": "3x1000", "x": "1000"}, ["y"], ["reduce=off"], False),
    ("matvec.tc", "dot", {"a": "1000", "b": "1000"}, ["s"], [], True),
    ("softmax.tc", "softmax_outputs", {"I": "4x1000"}, ["O", "mx", "sm"], ["fusion=min"], True),
    ("softmax.tc", "softmax_outputs", {"I": "3x33"}, ["O", "mx", "sm"],
     ["fusion=min", "reduce_threads=1024"], True),
    # the default fusion: the gpu-fusion step splits the fused row loop (rows < 4096)
    ("softmax.tc", "softmax_outputs", {"I": "4x1000"}, ["O", "mx", "sm"], [], True),
    ("softmax.tc", "softmax_outputs", {"I": "5x33"}, ["O", "mx", "sm"], [], True),
    ("reductions.tc", "int8_sum", {"A": "3x1000"}, ["S", "W"], [], True),
    ("argmin.tc", "argmax_int", {"A": "7x13"}, ["mx", "idx"], ["fusion=min", "reduce=on"], None),
    ("reductions.tc", "min_of_sums", {"A": "3x100", "B": "3x100"}, ["O"], [], None),
]


def main():
    tcomp, npygen = sys.argv[1], sys.argv[2]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for n, (f, name, shapes, outs, extra, mapped) in enumerate(CASES):
            path = os.path.join(CORPUS, f)
            what = f"{f} {name} {shapes} {' '.join(extra)}"
            opts = []
            for o in extra:
                opts += ["--option", o]
            shape_args = []
            for t, s in shapes.items():
                shape_args += ["--shape", f"{t}={s}"]
            code, text = tcf.run([tcomp, "emit", path, "-e", name, "--stage", "cuda",
                                  *shape_args, "--option", "target=cuda", *opts])
            if code:
                failures.append(f"{what}: emit failed:\n{text}")
                continue
            on_block = "a reduction on the threads in x" in text
            if mapped is not None and on_block != mapped:
                failures.append(f"{what}: mapped to a block: {on_block}, expected {mapped}")
            if on_block and "__shfl_down_sync" not in text:
                failures.append(f"{what}: no __shfl_down_sync in the CUDA text")
            feeds = []
            for k, (t, s) in enumerate(shapes.items()):
                fi = os.path.join(tmp, f"{n}_{t}.npy")
                dtype = {"int8_sum": "int8", "argmax_int": "int32"}.get(name, "float32")
                rang = ["--range", "-100:100"] if dtype != "float32" else []
                c, out = tcf.run([npygen, fi, dtype, s, "--seed", str(n * 7 + k + 1), *rang])
                if c:
                    failures.append(f"{what}: npygen: {out}")
                feeds += ["--in", f"{t}={fi}"]
            results = {}
            for label in ("interp", "cuda-emu"):
                fos = [os.path.join(tmp, f"{n}_{o}_{label}.npy") for o in outs]
                cmd = [tcomp, "run", path, "-e", name, "--no-cache", *feeds,
                       "--option", "target=" + label, *opts]
                for o, fo in zip(outs, fos):
                    cmd += ["--out", f"{o}={fo}"]
                c, out = tcf.run(cmd)
                if c:
                    failures.append(f"{what} [{label}]: tcomp run failed:\n{out}")
                    break
                results[label] = [tcf.read_npy(fo) for fo in fos]
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
