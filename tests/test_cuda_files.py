#!/usr/bin/env python3
"""The CUDA code of every def of examples/*.tc and bench/kernels.tc, and of
the backward defs derived from examples/*.tc and bench/grad.tc.

    python3 tests/test_cuda_files.py TCOMP NPYGEN [--nvrtc] [FILE.tc ...]

tests/corpus has its own CUDA checks with reference loops (test_corpus
cuda); this covers the other .tc files of the repository through the tcomp
command, at small odd sizes (7, 13, 5, 11, ...; windows 3; a derived def's
extents such as floor(H / 2) evaluated from those), and, without FILE
arguments, the defs `tcomp grad` derives (recompute and --saves, the
forward with saves included) from every def of examples/ and bench/grad.tc
(issue 17's check of derived backward defs on the emulator; a def tcomp
grad refuses must be refused with a located error):

  - the emulator (target=cuda-emu) runs each def on random inputs (npygen,
    seeded; integers in 0..3), under the default mapping and under a drawn
    one (block, grid, fusion), and its outputs equal the reference
    interpreter's (target=interp): integers and bools exactly, floats
    within 1e-4 relative (float sums in another order, CUDA's math
    functions within a few ulp); a race or an out-of-bounds access the
    emulator reports fails the run;
  - with --nvrtc (CMake found the toolkit), NVRTC compiles each def's code
    (`tcomp emit --stage cuda-resources`, which compiles a cubin) for
    sm_90 at the small sizes and at bench/baselines.c's shapes (the bench
    kernels), and for sm_80 under the drawn mapping (not the derived defs,
    for time: sm_90 under the default mapping).

Exits 1 listing every failure.
"""

import array
import ast
import os
import random
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "bench"))
import emit_stages  # noqa: E402  (shapes_for, BENCH_SHAPES)
import grad  # noqa: E402  (signatures: parameters whose extents hold parentheses)

SMALL = [7, 13, 5, 11, 9, 6, 4, 3]
DTYPES = {"float": "float32", "double": "float64", "half": "float16"}
NPY = {"<f4": "f", "<f8": "d", "<i1": "b", "<u1": "B", "<i2": "h", "<u2": "H", "<i4": "i",
       "<u4": "I", "<i8": "q", "<u8": "Q", "|b1": "B", "|i1": "b", "|u1": "B", "<f2": "H"}


def read_npy(path):
    """(dtype string, shape, values) of a little-endian C-order .npy file."""
    with open(path, "rb") as f:
        data = f.read()
    hlen = int.from_bytes(data[8:10], "little")
    header = ast.literal_eval(data[10:10 + hlen].decode("latin1"))
    values = array.array(NPY[header["descr"]])
    values.frombytes(data[10 + hlen:])
    return header["descr"], header["shape"], values


def same(a, b):
    """'' when the outputs agree, else what differs."""
    da, sa, va = a
    db, sb, vb = b
    if (da, sa, len(va)) != (db, sb, len(vb)):
        return f"dtype/shape {da}{sa} vs {db}{sb}"
    for i, (x, y) in enumerate(zip(va, vb)):
        if da in ("<f4", "<f8"):
            if x != x and y != y:
                continue
            if abs(x - y) <= 1e-4 * max(1.0, abs(x), abs(y)):
                continue
        elif x == y:
            continue
        return f"element {i}: {x} vs {y}"
    return ""


def small_shapes(ins, values):
    """--shape arguments for inputs ins ([(tensor, [dim, ...])]): every size symbol
    a value of values (emit_stages.shapes_for's), then every other extent (a derived
    def's `H / 2`, `((H - KH) / 2) + 1`, `max(1, KW / 2)`) evaluated from them."""
    sym = [[d for d in dims if re.fullmatch(r"[A-Za-z_]\w*", d)] for _, dims in ins]
    plain = emit_stages.shapes_for([(t, s) for (t, _), s in zip(ins, sym)], values)
    sizes = {}
    for (t, s), arg in zip([(t, s) for (t, _), s in zip(ins, sym)], plain[1::2]):
        shape = arg.split("=", 1)[1]
        if shape != "scalar":
            sizes.update(zip(s, map(int, shape.split("x"))))
    args = []
    for t, dims in ins:
        shape = []
        for d in dims:
            py = re.sub(r"\bfloor\(", "(", d).replace("/", "//")
            shape.append(int(eval(py, {"__builtins__": {}, "max": max, "min": min}, sizes)))
        args += ["--shape", t + "=" + ("x".join(map(str, shape)) if shape else "scalar")]
    return args


def derived(tcomp, tmp, sources, failures):
    """The backward defs `tcomp grad` derives from every def of sources (recompute
    and --saves; a --saves text equal to the other is left out) as files in tmp:
    [(file, label)].  A refusal (an integer output, ...) must be a located error;
    a derived text must pass `tcomp check`."""
    out = []
    for path in sources:
        for name in grad.signatures(tcomp, path):
            texts = set()
            for flags in ([], ["--saves"]):
                f = os.path.join(tmp, f"grad_{os.path.basename(path)[:-3]}_{name}"
                                      f"{'_saves' if flags else ''}.tc")
                code, text = run([tcomp, "grad", path, "-e", name, *flags, "-o", f])
                what = f"grad {' '.join(flags)} {os.path.relpath(path, REPO)} {name}"
                if code:
                    if not re.search(r"\.tc:\d+:\d+: error: ", text):
                        failures.append(f"{what}: refused without a location:\n{text}")
                    break
                try:
                    grad.signatures(tcomp, f)
                except SystemExit as e:
                    failures.append(f"{what}: the derived text does not check: {e}")
                    break
                with open(f) as fh:
                    body = fh.read()
                if body not in texts:
                    texts.add(body)
                    out.append((f, what.replace("  ", " ")))
    return out


def drawn_mapping(rng):
    nb = rng.randint(0, 3)
    block, threads = [], 1
    for k in range(nb):
        b = rng.choice([1, 2, 3, 4, 7, 8, 16, 32, 64])
        if threads * b > 1024 or (k == 2 and b > 64):
            b = 1
        threads *= b
        block.append(b)
    grid = [rng.randint(1, 3) for _ in range(rng.randint(0, 3))]
    return ["fusion=" + rng.choice(["max", "preserve3coincident", "min", "auto"]),
            "block=" + (",".join(map(str, block)) or "auto"),
            "grid=" + (",".join(map(str, grid)) or "auto"),
            "reduce=" + rng.choice(["auto", "on", "off"]),
            "reduce_threads=" + rng.choice(["auto", "32", "64", "256", "1024"]),
            "shared=" + rng.choice(["auto", "on", "off"]),
            "shared_tile=" + rng.choice(["auto", "1", "4", "16", "64"])]


def interp_and_emulator(tcomp, npygen, tmp, tag, path, name, shapes, outs, opts, dtype,
                        seed, failures, what):
    """{'interp': outputs, 'cuda-emu': outputs} of def name run on random inputs
    (npygen, dtype; integers in -100:100) by the interpreter and the emulator with
    the options opts (['--option', 'N=V', ...]); a failure appended to failures
    leaves its label out."""
    feeds = []
    for k, (t, s) in enumerate(shapes.items()):
        fi = os.path.join(tmp, f"{tag}_{t}.npy")
        rang = ["--range", "-100:100"] if dtype != "float32" else []
        c, out = run([npygen, fi, dtype, s, "--seed", str(seed + k), *rang])
        if c:
            failures.append(f"{what}: npygen: {out}")
        feeds += ["--in", f"{t}={fi}"]
    results = {}
    for label in ("interp", "cuda-emu"):
        fos = [os.path.join(tmp, f"{tag}_{o}_{label}.npy") for o in outs]
        cmd = [tcomp, "run", path, "-e", name, "--no-cache", *feeds,
               "--option", "target=" + label, *opts]
        for o, fo in zip(outs, fos):
            cmd += ["--out", f"{o}={fo}"]
        c, out = run(cmd)
        if c:
            failures.append(f"{what} [{label}]: tcomp run failed:\n{out}")
            break
        results[label] = [read_npy(fo) for fo in fos]
    return results


# LeakSanitizer's own failure, not a leak (which it reports as "detected memory
# leaks"): in the sanitizer build its tracer crashes at exit on a dynamic TLS entry
# it cannot read ("Tracer caught signal 11", "DTLS 8 at 0x...1512") in some tcomp
# processes that ran NVRTC, depending on their memory layout (the same command
# passed from one directory and failed from another; keeping NVRTC's builtins
# library loaded did not help).  Such a command runs once more with the leak check
# off: AddressSanitizer and UBSan still check it, and test_corpus_cuda checks the
# same NVRTC path for leaks in its own process.
LSAN_TRACER_FAILURE = "LeakSanitizer has encountered a fatal error"


def run(cmd):
    """(status, stdout + stderr) of cmd; after a LeakSanitizer tracer failure
    (LSAN_TRACER_FAILURE) once more without the leak check."""
    r = subprocess.run(cmd, capture_output=True, text=True)
    text = r.stdout + r.stderr
    if LSAN_TRACER_FAILURE in text and "detected memory leaks" not in text:
        env = dict(os.environ)
        env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":detect_leaks=0").lstrip(":")
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        text = r.stdout + r.stderr
    return r.returncode, text


def main():
    args = sys.argv[1:]
    nvrtc = "--nvrtc" in args
    args = [a for a in args if a != "--nvrtc"]
    tcomp, npygen = args[0], args[1]
    examples = sorted(os.path.join(REPO, "examples", f)
                      for f in os.listdir(os.path.join(REPO, "examples")) if f.endswith(".tc"))
    files = [(f, os.path.relpath(f, REPO)) for f in args[2:]] or \
        [(f, os.path.relpath(f, REPO)) for f in examples + [os.path.join(REPO, "bench", "kernels.tc")]]
    failures, checked, compared = [], 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        if not args[2:]:  # and the backward defs derived from examples/ and bench/grad.tc
            files += derived(tcomp, tmp, examples + [os.path.join(REPO, "bench", "grad.tc")],
                             failures)
        for path, label in files:
            for name, (params, results_) in grad.signatures(tcomp, path).items():
                rng = random.Random(f"{os.path.basename(path)}/{name}")
                what = f"{label} {name}"
                shape_args = small_shapes([(t, dims) for _, dims, t in params], SMALL)
                feeds = []
                for k, (ty, _, t) in enumerate(params):
                    shape = shape_args[2 * k + 1].split("=", 1)[1]
                    f = os.path.join(tmp, f"{name}_{t}.npy")
                    dtype = DTYPES.get(ty, ty)
                    rang = ["--range", "0:3"] if not dtype.startswith("float") else []
                    code, out = run([npygen, f, dtype, shape, "--seed", str(k + 1), *rang])
                    if code:
                        failures.append(f"{what}: npygen {t}: {out}")
                    feeds += ["--in", f"{t}={f}"]
                outs = [t for _, _, t in results_]
                mapping = drawn_mapping(rng)
                results = {}
                for how, opts in (("interp", ["target=interp"]),
                                  ("cuda-emu", ["target=cuda-emu"]),
                                  ("cuda-emu " + " ".join(mapping), ["target=cuda-emu", *mapping])):
                    files_out = [os.path.join(tmp, f"{name}_{o}_{len(results)}.npy") for o in outs]
                    cmd = [tcomp, "run", path, "-e", name, "--no-cache", *feeds]
                    for o, fo in zip(outs, files_out):
                        cmd += ["--out", f"{o}={fo}"]
                    for o in opts:
                        cmd += ["--option", o]
                    code, out = run(cmd)
                    if code:
                        failures.append(f"{what} [{how}]: tcomp run failed:\n{out}")
                        continue
                    results[how] = [read_npy(fo) for fo in files_out]
                checked += 1
                for how, got in results.items():
                    if how == "interp" or "interp" not in results:
                        continue
                    for o, g, w in zip(outs, got, results["interp"]):
                        compared += len(w[2])
                        diff = same(g, w)
                        if diff:
                            failures.append(f"{what} [{how}]: output {o} differs from the "
                                            f"interpreter's: {diff}")
                if not nvrtc:
                    continue
                sets = [("sm_90", shape_args, [])]
                if not label.startswith("grad"):  # a derived def (file label 'grad ...'): sm_90 only (time)
                    sets.append(("sm_80", shape_args, mapping))
                if path.endswith("bench/kernels.tc") and name in emit_stages.BENCH_SHAPES:
                    big = [a for t, s in emit_stages.BENCH_SHAPES[name].items()
                           for a in ("--shape", t + "=" + "x".join(map(str, s)))]
                    sets.append(("sm_90", big, []))
                for arch, shapes, extra in sets:
                    cmd = [tcomp, "emit", path, "-e", name, "--stage", "cuda-resources",
                           *shapes, "--option", "target=cuda", "--option", "gpu_arch=" + arch]
                    for o in extra:
                        cmd += ["--option", o]
                    code, out = run(cmd)
                    if code or "ptxas info" not in out:
                        failures.append(f"{what} [NVRTC {arch} {' '.join(extra)}]:\n{out}")
    for f in failures:
        print("FAIL:", f)
    print(f"{checked} defs checked ({compared} output elements compared), {len(failures)} failures")
    return 1 if failures or not checked or not compared else 0


if __name__ == "__main__":
    sys.exit(main())
