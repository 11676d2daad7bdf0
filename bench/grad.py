#!/usr/bin/env python3
"""Derived gradients against hand-written backward defs and PyTorch autograd.

    python3 bench/grad.py [--threads 1,2] [--only OP[,OP]] [--rounds R]
                          [--reps N] [--tcomp PATH] [--no-torch] [--no-venv]
                          [--no-compile] [--write] [--json-out FILE]

For each op of bench/grad.tc (the table OPS below: the forward def, its
hand-written backward def OP_bwd, shapes typical of training), in one run,
at every thread count, in round-robin rounds (each contender once per round,
the order rotated; a cell is the median over the rounds of the contender's
median time of a run):

  derived   `tcomp grad bench/grad.tc -e OP --wrt ...` (the gradients
            OP_bwd computes), timed by `tcomp bench --no-cache --json`
  saves     the same with `tcomp grad --saves` (saved temporaries inputs)
  hand      OP_bwd of bench/grad.tc, `tcomp bench --no-cache --json`
  autograd  PyTorch's backward alone: the forward run once outside the
            timed region, `torch.autograd.backward(outs, d_outs,
            retain_graph=True)` timed (bench/torch_bench.py, one server per
            thread count, torch.set_num_threads)
  compiled  the same on the torch.compile'd forward (its AOTAutograd
            backward), where torch.compile works

Every tcomp contender runs on real data (tcomp bench --in): the forward's
inputs are random (floats uniform in [-1, 1), integers in [0, int_hi)), the
forward's outputs and saved values are what tcomp run computes from them
(the hand-written def's from OP and OP_saves of bench/grad.tc, --saves'
from the derived OP_fwd), d_<output> is random.  Random outputs would hide
data-dependent branches: max-pool's backward compares I with O, which on
random O never holds.

A derivation that tcomp refuses today is "n/a" with its error's first line;
the row fills in when the derivation supports the op.  That the derived and
hand-written defs give the same numbers is tests/test_grad_hand.c's job.
The environment, the torch virtualenv (TCOMP_BENCH_VENV) and the clocks are
bench/compare.py's (reused from it).  --write puts the table between the
markers <!-- bench:grad:begin --> and <!-- bench:grad:end --> of
docs/performance.md ("Derived gradients").  See bench/README.md.
"""

import argparse
import array
import datetime
import json
import os
import random
import re
import shlex
import shutil
import statistics
import sys
import tempfile
import time
import zlib

import compare
from compare import NA, env_for, fmt_ms, json_line, run

BENCH = compare.BENCH
REPO = compare.REPO
GRAD_TC = os.path.join(BENCH, "grad.tc")
DOC = compare.DOC
BEGIN, END = "<!-- bench:grad:begin -->", "<!-- bench:grad:end -->"
CONTENDERS = ["derived", "saves", "hand", "autograd", "compiled"]
TITLES = {"derived": "derived", "saves": "derived --saves", "hand": "hand-written",
          "autograd": "torch autograd", "compiled": "torch.compile bwd"}

# op: the forward def's input shapes (the inputs in the def's order) and, for
# integer inputs, the range [0, int_hi) of PyTorch's values (tcomp bench
# draws integers in [1, min(16, E - 1)], E the smallest extent: in range too).
OPS = {
    "matmul": {"A": (256, 1024), "B": (1024, 1024)},
    "softmax": {"X": (4096, 1000)},
    "lsm_nll": {"X": (4096, 1000), "Y": (4096,)},
    "layernorm": {"X": (4096, 1024), "G": (1024,), "Bt": (1024,)},
    "fcrelu": {"X": (256, 1024), "W": (1024, 1024), "b": (1024,)},
    "mlp2": {"X": (256, 1024), "W1": (1024, 1024), "b1": (1024,), "W2": (512, 1024),
             "b2": (512,)},
    "conv2d": {"I": (8, 64, 56, 56), "W1": (64, 64, 3, 3), "B": (64,)},
    "conv2d_s2": {"I": (8, 64, 57, 57), "W1": (64, 64, 3, 3)},
    "conv2d_pad": {"I": (8, 64, 56, 56), "W1": (64, 64, 3, 3)},
    "maxpool": {"I": (16, 64, 56, 56)},
    "embedding": {"E": (1000, 256), "Ids": (1024,)},
}
INT_HI = {("lsm_nll", "Y"): 1000, ("embedding", "Ids"): 1000}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---- signatures -----------------------------------------------------------

SIG = re.compile(r"^def (\w+)\((.*)\) -> \((.*)\)$")


def split_params(text):
    """'float32(M,K) A, int64(N) Y, float32 d_L' -> [(type, [dims], name)]."""
    out, depth, cur = [], 0, ""
    for ch in text + ",":
        if ch == "," and depth == 0:
            cur = cur.strip()
            if cur:
                m = re.match(r"^(\w+)(?:\((.*)\))?\s+(\w+)$", cur)
                if not m:
                    raise SystemExit(f"grad.py: cannot read the parameter '{cur}'")
                dims = [d.strip() for d in split_top(m.group(2))] if m.group(2) else []
                out.append((m.group(1), dims, m.group(3)))
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    return out


def split_top(text):
    """Split at the commas outside parentheses."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    return parts + [cur]


def signatures(tcomp, path):
    """{def: (inputs, outputs)} from `tcomp check PATH`."""
    rc, out, err = run([tcomp, "check", path])
    if rc != 0:
        raise SystemExit(f"grad.py: tcomp check {path} failed: {compare.first_line(err or out)}")
    sigs = {}
    for line in out.splitlines():
        m = SIG.match(line.split("  #")[0])
        if m:
            sigs[m.group(1)] = (split_params(m.group(2)), split_params(m.group(3)))
    return sigs


def eval_dim(expr, sizes):
    """An extent as tcomp check prints it (sizes, + - *, floor(a / b))."""
    py = expr.replace("floor(", "_floor(").replace("/", "//")
    return int(eval(py, {"__builtins__": {}, "_floor": lambda x: x}, dict(sizes)))


def bind_sizes(params, shapes):
    """The sizes of a def's inputs given their shapes."""
    sizes = {}
    for _, dims, name in params:
        for d, n in zip(dims, shapes[name]):
            if re.fullmatch(r"[A-Za-z_]\w*", d):
                sizes[d] = n
    return sizes


def shapes_of(params, sizes):
    return {name: tuple(eval_dim(d, sizes) for d in dims) for _, dims, name in params}


# ---- data ------------------------------------------------------------------

def random_npy(path, is_int, shape, int_hi, seed):
    """Random data: floats uniform in [-1, 1) without 0, integers in [0, int_hi)."""
    rng = random.Random(seed)
    n = 1
    for d in shape:
        n *= d
    if is_int:
        compare.write_npy(path, "<i8", shape,
                          array.array("q", (rng.randrange(int_hi) for _ in range(n))).tobytes())
    else:
        compare.write_npy(path, "<f4", shape, array.array(
            "f", ((rng.random() * 2 - 1) or 0.5 for _ in range(n))).tobytes())
    return path


# ---- the contenders -------------------------------------------------------

class Op:
    """One op: its defs and files (written into workdir) and every tensor's shape."""

    def __init__(self, name, tcomp, sigs, workdir):
        self.name, self.tcomp, self.sigs, self.workdir = name, tcomp, sigs, workdir
        self.inputs = OPS[name]
        self.files = {}     # "contender" -> {input name: .npy path} or NA
        self.produced = {}  # (file, def) -> {output name: .npy path} or NA
        self.dsigs = {}     # derived file -> its signatures
        fwd_in, fwd_out = sigs[name]
        self.types = {n: t for t, _, n in fwd_in}
        sizes = bind_sizes(fwd_in, self.inputs)
        self.shapes = dict(self.inputs)
        for n, s in shapes_of(fwd_out, sizes).items():
            self.shapes[n] = s
            self.shapes["d_" + n] = s
        if name + "_saves" in sigs:
            self.shapes.update(shapes_of(sigs[name + "_saves"][1], sizes))
        self.hand = (GRAD_TC, name + "_bwd", sigs[name + "_bwd"][0])
        self.wrt = [n[2:] for _, _, n in sigs[name + "_bwd"][1]]
        self.sizes = sizes
        self.derived = {}   # "derived" / "saves" -> (file, def, inputs) or NA
        for c, flags in (("derived", []), ("saves", ["--saves"])):
            path = os.path.join(workdir, f"{name}_{c}.tc")
            rc, out, err = run([tcomp, "grad", GRAD_TC, "-e", name, "--wrt", ",".join(self.wrt),
                                *flags, "-o", path])
            if rc != 0:
                msg = (err or out).replace(REPO + "/", "")
                self.derived[c] = NA("refused: " + compare.first_line(msg, 300))
                continue
            with open(path) as f:
                self.derived[c + "_text"] = f.read()
            try:
                dsigs = signatures(tcomp, path)
            except SystemExit as e:
                self.derived[c] = NA(f"the derived text does not check: {e}")
                continue
            self.dsigs[path] = dsigs
            if name + "_fwd" in dsigs:
                for n, s in shapes_of(dsigs[name + "_fwd"][1], sizes).items():
                    self.shapes.setdefault(n, s)
            self.derived[c] = (path, name + "_grad", dsigs[name + "_grad"][0])

    def input_file(self, n):
        """The random .npy of the forward input or d_<output> n."""
        key = "in:" + n
        if key not in self.files:
            is_int = n in self.types and self.types[n].startswith("int")
            self.files[key] = random_npy(os.path.join(self.workdir, f"{self.name}.{n}.npy"),
                                         is_int, self.shapes[n],
                                         INT_HI.get((self.name, n), 1),
                                         zlib.crc32(f"{self.name}.{n}".encode()))
        return self.files[key]

    def produce(self, path, entry, sigs):
        """{output name: .npy} of `tcomp run path -e entry` on the forward's inputs, or NA."""
        key = (path, entry)
        if key not in self.produced:
            ins, outs = sigs[entry]
            files = {n: os.path.join(self.workdir, f"{self.name}.{entry}.{os.path.basename(path)}"
                                     f".{n}.npy") for _, _, n in outs}
            cmd = [self.tcomp, "run", path, "-e", entry, "--no-cache"]
            for _, _, n in ins:
                cmd += ["--in", f"{n}={self.input_file(n)}"]
            for n, f in files.items():
                cmd += ["--out", f"{n}={f}"]
            rc, out, err = run(cmd)
            self.produced[key] = files if rc == 0 else NA(
                f"tcomp run -e {entry} exit {rc}: {compare.first_line(err or out)}")
        return self.produced[key]

    def data(self, contender, params):
        """{input name: .npy} for the backward def of contender: the forward's inputs
        and d_<output> random, outputs and saved values computed by the forward."""
        if contender in self.files:
            return self.files[contender]
        producers = [(GRAD_TC, self.name, self.sigs)]
        if contender == "hand" and self.name + "_saves" in self.sigs:
            producers.insert(0, (GRAD_TC, self.name + "_saves", self.sigs))
        if contender == "saves":
            path = self.derived["saves"][0]
            producers.insert(0, (path, self.name + "_fwd", self.dsigs[path]))
        files = {}
        for _, _, n in params:
            if n in self.inputs or (n.startswith("d_") and n in self.shapes):
                files[n] = self.input_file(n)
                continue
            for path, entry, sigs in producers:
                if entry in sigs and any(o == n for _, _, o in sigs[entry][1]):
                    got = self.produce(path, entry, sigs)
                    if isinstance(got, NA):
                        self.files[contender] = got
                        return got
                    files[n] = got[n]
                    break
            else:
                files = NA(f"no forward def computes the input '{n}'")
                break
        self.files[contender] = files
        return files

    def bench_cmd(self, contender, threads, runs, min_time):
        spec = self.hand if contender == "hand" else self.derived[contender]
        if isinstance(spec, NA):
            return spec
        path, entry, params = spec
        files = self.data(contender, params)
        if isinstance(files, NA):
            return files
        cmd = [self.tcomp, "bench", path, "-e", entry]
        for _, _, n in params:
            cmd += ["--in", f"{n}={files[n]}"]
        return cmd + ["--no-cache", "--threads", str(threads), "--runs", str(runs),
                      "--min-time", str(min_time), "--json"]

    def torch_request(self, mode, reps):
        ins = [{"name": n, "dtype": "int64" if self.types[n].startswith("int") else "float32",
                "shape": list(s), "int_hi": INT_HI.get((self.name, n), 1)}
               for n, s in self.inputs.items()]
        return {"grad": {"op": self.name, "inputs": ins, "wrt": self.wrt, "seed": 1},
                "mode": mode, "reps": reps}


def tcomp_measure(cmd, threads):
    if isinstance(cmd, NA):
        return cmd
    rc, out, err = run(cmd, env=env_for(threads))
    res = json_line(out)
    if rc == 0 and res and "median_ms" in res:
        return res
    return NA(f"tcomp bench exit {rc}: {compare.first_line(err or out)}")


# ---- the report -----------------------------------------------------------

def ratio(a, b):
    return f"{a / b:.2f}x" if a is not None and b else "–"


def report(results, meta):
    notes = []

    def note(text):
        """The number of the footnote saying text."""
        if text not in notes:
            notes.append(text)
        return notes.index(text) + 1

    head = ["op", "shapes", "threads"] + [f"{TITLES[c]} ms" for c in CONTENDERS] + \
        ["derived / hand", "saves / hand", "derived / autograd", "saves / autograd",
         "hand / autograd"]
    rows = []
    for r in results:
        ms = r["ms"]
        shapes = ", ".join(f"{n} {'x'.join(map(str, s)) or 'scalar'}"
                           for n, s in OPS[r["op"]].items())
        threads = str(r["threads"])
        if r["others"] > compare.BUSY:
            threads += " (busy %.2f [%d])" % (r["others"], note(
                f"busy: other processes used this many cores on average (from /proc) while "
                f"the row ran, more than {compare.BUSY}: its times are suspect"))
        cells = [r["op"], shapes, threads]
        for c in CONTENDERS:
            cells.append(fmt_ms(ms[c]) if c in ms else
                         "n/a [%d]" % note(f"{TITLES[c]}: {r['na'].get(c, '?')}"))
        cells += [ratio(ms.get("derived"), ms.get("hand")), ratio(ms.get("saves"), ms.get("hand")),
                  ratio(ms.get("derived"), ms.get("autograd")),
                  ratio(ms.get("saves"), ms.get("autograd")),
                  ratio(ms.get("hand"), ms.get("autograd"))]
        rows.append(cells)
    now = datetime.datetime.fromtimestamp(meta["started"], datetime.timezone.utc)
    tinfo = meta["torch"]
    torch_text = (f"torch {tinfo['version']} (BLAS {tinfo.get('blas', '?')}, CPU capability "
                  f"{tinfo.get('cpu_capability', '?')})" if tinfo else
                  "not measured: " + meta["torch_na"])
    lines = [
        "Generated by `bench/grad.py`; do not edit by hand between the markers.",
        "",
        f"- Machine: {compare.machine()}; load average {' '.join(meta['load_before'])} before, "
        f"{' '.join(meta['load_after'])} after.",
        f"- Date: {now:%Y-%m-%d %H:%M} UTC; the run took {meta['seconds'] / 60:.1f} min.",
        f"- Command: `{meta['command']}`",
        f"- tcomp: commit {meta['commit']}; `tcomp bench --no-cache --runs {meta['runs']} "
        f"--min-time {meta['min_time']} --json` (default options, the thread count), float32, "
        "every input from a .npy (`--in`): the forward's inputs random, its outputs and saved "
        "values computed by the forward (`tcomp run`), `d_<output>` random.",
        f"- PyTorch: {torch_text}; autograd's backward alone (forward outside the timed region, "
        "`retain_graph=True`, gradients reset to None before each run), "
        "`torch.set_num_threads(N)`; torch.compile with the default inductor backend and mode.",
        f"- Method: {meta['rounds']} round-robin rounds, the contenders' order rotated; a cell is "
        + ("the median over the rounds of a contender's median time of a run"
           if meta["stat"] == "median" else
           "the minimum over all rounds of a contender's fastest run (`--stat min`)")
        + ". Ratios above 1: the first is slower. The environment of every contender is "
        "bench/compare.py's.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "|".join("---" for _ in head) + "|",
    ]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    if notes:
        lines.append("")
        lines += [f"[{i + 1}] {n}" + ("  " if i + 1 < len(notes) else "")
                  for i, n in enumerate(notes)]
    return "\n".join(lines)


def write_doc(text):
    with open(DOC) as f:
        doc = f.read()
    if BEGIN not in doc or END not in doc:
        raise SystemExit(f"grad.py: {DOC} has no {BEGIN} ... {END} markers")
    start = doc.index(BEGIN) + len(BEGIN)
    end = doc.index(END, start)
    with open(DOC, "w") as f:
        f.write(doc[:start] + "\n" + text + "\n" + doc[end:])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="See bench/README.md.")
    ap.add_argument("--threads", default="1,2", help="thread counts (default 1,2)")
    ap.add_argument("--only", help="OP[,OP]: ops of the table (default all): "
                    + ", ".join(OPS))
    ap.add_argument("--rounds", type=int, default=3, help="round-robin rounds (default 3)")
    ap.add_argument("--reps", type=int, default=5, help="timed runs per measurement "
                    "(default 5; tcomp bench --runs and torch)")
    ap.add_argument("--min-time", type=float, default=0.2, help="tcomp bench --min-time")
    ap.add_argument("--tcomp", default=os.environ.get("TCOMP", os.path.join(REPO, "build", "tcomp")))
    ap.add_argument("--no-torch", action="store_true", help="leave PyTorch out")
    ap.add_argument("--no-venv", action="store_true",
                    help="do not create bench/.venv nor pip install torch")
    ap.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    ap.add_argument("--print-derived", action="store_true",
                    help="print the derived texts before measuring")
    ap.add_argument("--stat", choices=("median", "min"), default="median",
                    help="what a cell is: the median over the rounds of each run's median "
                    "(default), or the minimum over all timed runs (for a busy machine)")
    ap.add_argument("--write", action="store_true",
                    help="write the table into docs/performance.md")
    ap.add_argument("--json-out", help="also write every measurement to this JSON file")
    a = ap.parse_args()
    threads_list = [int(t) for t in a.threads.split(",") if t]
    ops = [o for o in (a.only.split(",") if a.only else OPS) if o]
    for o in ops:
        if o not in OPS:
            raise SystemExit(f"grad.py: --only {o}: no such op; there are: {', '.join(OPS)}")
    tcomp = os.path.abspath(a.tcomp)
    started = time.time()
    load_before = open("/proc/loadavg").read().split()[:3]
    workdir = tempfile.mkdtemp(prefix="tcomp-grad-")
    servers = {}
    try:
        sigs = signatures(tcomp, GRAD_TC)
        if a.no_torch:
            py, tinfo = None, "left out (--no-torch)"
        else:
            py, tinfo = compare.find_torch(a.no_venv)
        if py is None:
            log("grad.py: torch n/a: " + tinfo)
        contenders = [c for c in CONTENDERS if not (a.no_compile and c == "compiled")]
        results = []
        for oi, name in enumerate(ops):
            op = Op(name, tcomp, sigs, workdir)
            if a.print_derived:
                for c in ("derived", "saves"):
                    text = op.derived.get(c + "_text")
                    print(text if text is not None else f"# {c}: {op.derived[c].reason}\n")
            for threads in threads_list:
                if py and threads not in servers:
                    servers[threads] = compare.TorchServer(py, threads)
                samples = {c: [] for c in contenders}
                mins = {c: [] for c in contenders}
                na = {}
                cpu0 = compare.cpu_sample()
                for r in range(a.rounds):
                    order = contenders[r % len(contenders):] + contenders[:r % len(contenders)]
                    for c in order:
                        if c in na:
                            continue
                        if c in ("derived", "saves", "hand"):
                            m = tcomp_measure(op.bench_cmd(c, threads, a.reps, a.min_time),
                                              threads)
                        elif py is None:
                            m = NA(tinfo)
                        else:
                            mode = "autograd" if c == "autograd" else "autograd_compile"
                            m = servers[threads].ask(op.torch_request(mode, a.reps))
                        if isinstance(m, NA):
                            na[c] = m.reason
                            continue
                        samples[c].append(m["median_ms"])
                        mins[c].append(m["min_ms"])
                    log(f"[{oi + 1}/{len(ops)}] {name} threads={threads} round {r + 1}/{a.rounds}: "
                        + ", ".join(f"{c} {fmt_ms(samples[c][-1])} ms" if c not in na and samples[c]
                                    else f"{c} n/a" for c in contenders))
                results.append({"op": name, "threads": threads, "samples": samples, "mins": mins,
                                "na": na,
                                "ms": {c: statistics.median(v) if a.stat == "median" else min(mins[c])
                                       for c, v in samples.items() if v},
                                "others": compare.others_cores(cpu0, compare.cpu_sample())})
                for c in contenders:
                    if c in na:
                        log(f"  {c}: n/a: {na[c]}")
    finally:
        for s in servers.values():
            s.close()
        shutil.rmtree(workdir, ignore_errors=True)
    env = " ".join(f"{k}={shlex.quote(os.environ[k])}" for k in ("TCOMP_BENCH_VENV", "TCOMP")
                   if os.environ.get(k))
    cmd = " ".join(shlex.quote(x) for x in ["python3", "bench/grad.py", *sys.argv[1:]])
    meta = {"started": started, "seconds": time.time() - started, "load_before": load_before,
            "load_after": open("/proc/loadavg").read().split()[:3],
            "command": (env + " " + cmd) if env else cmd,
            "commit": compare.git("rev-parse", "--short", "HEAD") or "?",
            "runs": a.reps, "min_time": a.min_time, "rounds": a.rounds, "stat": a.stat,
            "torch": tinfo if py else None, "torch_na": None if py else tinfo}
    text = report(results, meta)
    print(text)
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(results, f, indent=1)
    if a.write:
        write_doc(text)
        log(f"grad.py: table written to {os.path.relpath(DOC, os.getcwd())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
