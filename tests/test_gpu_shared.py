#!/usr/bin/env python3
"""Shared-memory promotion of GPU kernels (polyhedral/gpu_shared.c, the shared option).

    python3 tests/test_gpu_shared.py TCOMP NPYGEN

For matmuls (plain, a transposed operand, batched, odd sizes with partial
tiles, small blocks whose grid wraps around, several reduced-loop steps), a
convolution with and without bias, a strided convolution, a Gram matrix (its
input read at two elements per instance: never copied) and an int32 matmul:
the CUDA text (`tcomp emit --stage cuda`) declares a shared copy of exactly the
tensors expected (TC_SHARED(..., tc_sh_NAME, ...)), copies them between
__syncthreads() barriers, and the emulator (target=cuda-emu, which reports
shared-memory races, out-of-bounds accesses and barrier divergence) gives the
interpreter's outputs on random inputs (npygen; outputs poisoned by the run).
shared=off is the control: no copy, the same outputs; under 4096 outputs
the reduction on a block (the reduce option) comes first, so most cases set
reduce=off.  Exits 1 listing every
failure.
"""

import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_cuda_files as tcf  # noqa: E402  (interp_and_emulator, same, run)

CORPUS = os.path.join(HERE, "corpus")

GRAM = """
def gram(float(M,K) A) -> (G) {
    G(m,n) +=! A(m,r_k) * A(n,r_k)
}
def imatmul(int32(M,K) A, int32(K,N) B) -> (C) {
    C(m,n) +=! A(m,r_k) * B(r_k,n)
}
"""

# (file, def, {input: shape}, outputs, extra options, tensors copied to shared memory)
CASES = [
    ("matmul.tc", "matmul", {"A": "100x64", "B": "64x70"}, ["C"], [], {"A", "B"}),
    # fewer than 4096 outputs: the reduction on a block's threads comes first ...
    ("matmul.tc", "matmul", {"A": "37x45", "B": "45x19"}, ["C"], [], set()),
    # ... unless reduce=off
    ("matmul.tc", "matmul", {"A": "37x45", "B": "45x19"}, ["C"], ["reduce=off", "shared_tile=8"],
     {"A", "B"}),
    ("matmul.tc", "matmul", {"A": "23x40", "B": "40x29"}, ["C"],
     ["reduce=off", "block=7,3", "grid=2,1", "shared_tile=16", "shared=on"], {"A", "B"}),
    ("matmul.tc", "matmul", {"A": "100x64", "B": "64x70"}, ["C"], ["shared=off"], set()),
    ("matmul.tc", "matmul_nt", {"A": "33x50", "B": "65x50"}, ["C"], ["reduce=off"], {"A", "B"}),
    ("matmul.tc", "matmul_tn", {"A": "50x33", "B": "50x65"}, ["C"], ["reduce=off"], {"A", "B"}),
    ("matmul.tc", "batch_matmul", {"X": "3x20x30", "Y": "3x30x17"}, ["Z"], ["reduce=off"],
     {"X", "Y"}),
    ("conv2d.tc", "conv2d_nobias", {"I": "2x5x12x40", "W1": "4x5x3x3"}, ["O"], [], {"I", "W1"}),
    ("conv2d.tc", "conv2d_nobias", {"I": "1x3x9x9", "W1": "2x3x3x3"}, ["O"],
     ["reduce=off", "block=4,4,2", "shared_tile=2"], {"I", "W1"}),
    ("conv2d.tc", "conv2d", {"I": "2x4x10x11", "W1": "3x4x3x3", "B": "3"}, ["O"], ["reduce=off"],
     None),
    ("conv_strided.tc", "conv2d_stride2", {"I": "1x3x13x13", "W1": "4x3x3x3"}, ["O"],
     ["reduce=off"], None),
    # pad: the domain restricted by the reads' bounds clips the footprint at
    # the border; a box reaching past the tensor holds it (gpu_shared.c, try_piece)
    ("pad.tc", "conv_same", {"I": "2x5x12x40", "Wt": "4x5x3x3"}, ["O"], [], {"I", "Wt"}),
    ("pad.tc", "conv_s2_same", {"I": "1x3x13x13", "Wt": "4x3x3x3"}, ["O"], ["reduce=off"],
     {"I", "Wt"}),
    ("pad.tc", "conv_input_grad", {"dO": "2x4x10x11", "Wt": "4x3x3x3"}, ["dI"], ["reduce=off"],
     {"dO", "Wt"}),
    (None, "gram", {"A": "40x33"}, ["G"], ["reduce=off"], set()),
    (None, "imatmul", {"A": "30x50", "B": "50x20"}, ["C"], ["reduce=off", "shared=on"], {"A", "B"}),
]


def main():
    tcomp, npygen = sys.argv[1], sys.argv[2]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        local = os.path.join(tmp, "local.tc")
        with open(local, "w") as f:
            f.write(GRAM)
        for n, (f, name, shapes, outs, extra, copied) in enumerate(CASES):
            path = os.path.join(CORPUS, f) if f else local
            what = f"{f or 'local'} {name} {shapes} {' '.join(extra)}"
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
            got = set(re.findall(r"TC_SHARED\([^,]+, tc_sh_(\w+), \d+\)", text))
            if copied is not None and got != copied:
                failures.append(f"{what}: copied {sorted(got)}, expected {sorted(copied)}")
            if got and text.count("__syncthreads();") < 2:
                failures.append(f"{what}: copies without their two barriers")
            if copied is None and not got:
                failures.append(f"{what}: nothing copied")
            results = tcf.interp_and_emulator(tcomp, npygen, tmp, str(n), path, name, shapes,
                                              outs, opts,
                                              "int32" if name == "imatmul" else "float32",
                                              n * 7 + 1, failures, what)
            if len(results) == 2:
                for o, g, w in zip(outs, results["cuda-emu"], results["interp"]):
                    # the reduced loops run in the interpreter's order: bit for
                    # bit (a reduction on a block's threads: within rounding)
                    if (g != w) if "reduce=off" in extra or got else tcf.same(g, w):
                        failures.append(f"{what}: output {o} differs from the interpreter's: "
                                        f"{tcf.same(g, w) or 'in the last bits'}")
    for f in failures:
        print("FAIL:", f)
    print(f"{len(CASES)} cases, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
