#!/usr/bin/env python3
"""Compare tcomp with OpenBLAS, naive C and PyTorch (eager, torch.compile).

    python3 bench/compare.py [--quick] [--threads 1,2] [--only NAME,...]
                             [--rounds R] [--reps N] [--options FILE]
                             [--tcomp PATH] [--no-write] [--no-venv]

Every benchmark of `baselines list` (the table in bench/baselines.c) is
measured at every thread count, in round-robin rounds: each round runs every
contender once, the order rotated from round to round, and the table gives
the median over the rounds of each contender's median time.  The contenders:

  tcomp     `tcomp bench bench/kernels.tc -e DEF --shape ... --threads N --json`
  OpenBLAS  bench/baselines.c compiled with gcc -O3 -march=native -lopenblas
  naive     the plain loop nests of bench/baselines.c (same binary)
  eager     PyTorch eager, bench/torch_bench.py
  compile   torch.compile (inductor, default mode), bench/torch_bench.py

All run with the same thread count and the same environment, including the
glibc malloc tunables of TUNABLES below (no mmap/munmap of big buffers, so
no contender pays this machine's slow first-touch page faults run after run)
and OPENBLAS_CORETYPE=SkylakeX on AVX-512 hosts.  Once per benchmark every contender's output
on the same inputs is compared with the naive C output; a disagreement is a
WARNING line and a mark in the table.  The table goes between the markers
<!-- bench:compare:begin --> and <!-- bench:compare:end --> of
docs/performance.md (unless --no-write).  See bench/README.md.
"""

import argparse
import datetime
import json
import os
import platform
import queue
import shlex
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH)
DOC = os.path.join(REPO, "docs", "performance.md")
BEGIN, END = "<!-- bench:compare:begin -->", "<!-- bench:compare:end -->"
SECTION = "## Comparison with OpenBLAS, naive C and PyTorch"

# glibc 2.36 malloc tunables (names from `/lib64/ld-linux-x86-64.so.2
# --list-tunables`; checked with strace: a freed 1000 MiB block is reused
# from the brk heap): blocks of any size up to 2 GiB come from the heap
# instead of a fresh mmap (mmap_threshold), freed memory is not given back to
# the kernel (trim_threshold), and the heap grows 256 MiB at a time (top_pad).
# So a buffer freed and allocated again, as PyTorch eager does for every
# output, reuses pages already faulted in.  (Threads other than the main one
# allocate from mmap'd arenas of 64 MiB, where bigger blocks still get mmap.)
TUNABLES = ("glibc.malloc.mmap_threshold=2147483647:"
            "glibc.malloc.trim_threshold=2147483647:"
            "glibc.malloc.top_pad=268435456")


def host_coretype():
    """OpenBLAS 0.3.21 does not know Zen 4's AVX-512 and would take its
    AVX2 kernels: name SkylakeX's where the host has AVX-512F.  Elsewhere
    (an AVX2 host) OpenBLAS's own detection, SkylakeX's kernels would not
    run there."""
    try:
        with open("/proc/cpuinfo") as f:
            return "SkylakeX" if " avx512f" in f.read() else None
    except OSError:
        return None


CORETYPE = host_coretype()
CONTENDERS = ["tcomp", "openblas", "naive", "eager", "compile"]
TITLES = {"tcomp": "tcomp", "openblas": "OpenBLAS", "naive": "naive C",
          "eager": "torch eager", "compile": "torch.compile"}
REL_TOL = 1e-4   # max |out - naive| / max |naive| allowed by the cross-check
CALL_TIMEOUT = 900


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def first_line(text, limit=200):
    lines = [l.strip() for l in (text or "").strip().splitlines() if l.strip()]
    return (lines[0] if lines else "no message")[:limit]


def run(cmd, env=None, timeout=CALL_TIMEOUT):
    """Run cmd; (returncode, stdout, stderr); a timeout is returncode -999."""
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return -999, "", f"timed out after {timeout} s"
    except OSError as e:
        return -998, "", str(e)


def write_npy(path, descr, shape, raw):
    """A C-order .npy file (version 1.0) of dtype descr ('<f4', '<i8', ...) and
    shape, its data the bytes raw."""
    head = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, "".join("%d, " % d for d in shape))
    head += " " * ((64 - (10 + len(head) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode("latin1"))
        f.write(raw)


def json_line(text):
    """The last line of text that parses as a JSON object, or None."""
    for line in reversed((text or "").strip().splitlines()):
        try:
            v = json.loads(line)
            if isinstance(v, dict):
                return v
        except ValueError:
            pass
    return None


class NA:
    """A contender that could not be measured, and why."""

    def __init__(self, reason):
        self.reason = reason


# ---- the contenders ------------------------------------------------------

class Baselines:
    """bench/baselines.c, built here with gcc (with OpenBLAS when it links)."""

    def __init__(self, workdir):
        self.exe = os.path.join(workdir, "baselines")
        self.flags = ["-O3", "-march=native"]
        self.openblas = None      # None: linked; else the reason it is not
        src = os.path.join(BENCH, "baselines.c")
        inc = "/usr/include/x86_64-linux-gnu/openblas-pthread"
        with_blas = ["gcc", *self.flags, "-DHAVE_OPENBLAS"] + \
            (["-I" + inc] if os.path.isdir(inc) else []) + \
            [src, "-o", self.exe, "-lopenblas", "-lpthread", "-lm"]
        rc, _, err = run(with_blas)
        if rc != 0:
            why = [l.strip() for l in (err or "").splitlines() if "error" in l] or [err]
            self.openblas = ("OpenBLAS not found (gcc -lopenblas: " + first_line(why[0], 120) +
                             "; Debian: apt-get install -y libopenblas-dev)")
            rc, _, err = run(["gcc", *self.flags, src, "-o", self.exe, "-lpthread", "-lm"])
            if rc != 0:
                raise SystemExit("compare.py: cannot build bench/baselines.c: " + first_line(err))
        rc, out, _ = run([self.exe, "info"], env=env_for(1))
        self.info = json_line(out) or {}
        self.gcc = first_line(run(["gcc", "--version"])[1])

    def list(self):
        rc, out, err = run([self.exe, "list"])
        if rc != 0:
            raise SystemExit("compare.py: baselines list failed: " + first_line(err))
        return [json.loads(l) for l in out.splitlines() if l.strip()]

    def inputs(self, bench, d):
        rc, out, err = run([self.exe, bench["name"], "inputs", "1", "0", d])
        if rc != 0:
            raise SystemExit(f"compare.py: cannot write the inputs of {bench['name']}: "
                             + first_line(err))

    def measure(self, impl, bench, threads, reps, dump_dir):
        if impl == "openblas" and self.openblas:
            return NA(self.openblas)
        if impl == "openblas" and not bench["openblas"]:
            return NA("no BLAS routine for this operation")
        cmd = [self.exe, bench["name"], impl, str(threads), str(reps)] + \
            ([dump_dir] if dump_dir else [])
        rc, out, err = run(cmd, env=env_for(threads))
        res = json_line(out)
        if res and "median_ms" in res:
            return res
        if res and "error" in res:
            return NA(res["error"])
        return NA(f"baselines exit {rc}: {first_line(err)}")

    def compare(self, ref, out):
        rc, text, err = run([self.exe, "cmp", ref, out])
        return json_line(text) or {"error": first_line(err)}


class Tcomp:
    """The tcomp command: `tcomp bench ... --json` and `tcomp run` for the check."""

    def __init__(self, exe, options, quick):
        self.exe, self.options = exe, options
        self.runs, self.min_time = (3, 0.1) if quick else (5, 0.2)
        self.kernels = os.path.join(BENCH, "kernels.tc")
        self.broken = None
        if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
            self.broken = f"no tcomp binary at {exe} (build it, or pass --tcomp / set TCOMP)"
            return
        rc, out, err = run([exe, "check", self.kernels])
        if rc != 0:
            self.broken = "tcomp check bench/kernels.tc failed: " + first_line(err or out)

    def _opts(self):
        # --no-cache: the defaults (or the file), never a tuned kernel cache entry
        return ["--no-cache"] + (["--options", self.options] if self.options else [])

    def measure(self, bench, threads):
        if self.broken:
            return NA(self.broken)
        shapes = []
        for t in bench["inputs"]:
            shapes += ["--shape", t["name"] + "=" + "x".join(map(str, t["shape"]))]
        cmd = [self.exe, "bench", self.kernels, "-e", bench["entry"], *shapes, *self._opts(),
               "--threads", str(threads), "--runs", str(self.runs),
               "--min-time", str(self.min_time), "--json"]
        rc, out, err = run(cmd, env=env_for(threads))
        res = json_line(out)
        if rc == 0 and res and "median_ms" in res:
            return res
        return NA(f"tcomp bench exit {rc}: {first_line(err or out)}")

    def output(self, bench, threads, d):
        """Run the def once on the dumped inputs, writing every output as
        out_path(d, "tcomp", ...); None, or NA when it failed."""
        if self.broken:
            return NA(self.broken)
        cmd = [self.exe, "run", self.kernels, "-e", bench["entry"]]
        for t in bench["inputs"]:
            cmd += ["--in", f"{t['name']}={os.path.join(d, 'in_' + t['name'] + '.npy')}"]
        for t in outputs(bench):
            cmd += ["--out", f"{t['name']}={out_path(d, 'tcomp', t)}"]
        cmd += [*self._opts(), "--threads", str(threads)]
        rc, _, err = run(cmd, env=env_for(threads))
        return None if rc == 0 else NA(f"tcomp run exit {rc}: {first_line(err)}")


class TorchServer:
    """bench/torch_bench.py --serve in the chosen Python, one per thread count."""

    def __init__(self, python, threads):
        self.threads = threads
        self.dead = None
        self.errlog = tempfile.TemporaryFile(mode="w+")
        try:
            self.proc = subprocess.Popen(
                [python, os.path.join(BENCH, "torch_bench.py"), "--serve",
                 "--threads", str(threads)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errlog,
                text=True, env=env_for(threads), bufsize=1)
        except OSError as e:
            self.dead = f"cannot start {python}: {e}"
            return
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        hello = self._answer(300)
        if not hello or not hello.get("ok"):
            self.dead = (hello or {}).get("error") or "torch_bench.py did not start: " + self._tail()
            self.close()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _tail(self):
        self.errlog.seek(0)
        lines = [l.strip() for l in self.errlog.read().splitlines() if l.strip()]
        return lines[-1][:200] if lines else "no message"

    def _answer(self, timeout):
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            return None
        return json.loads(line) if line else None

    def measure(self, mode, bench, reps, d, dump):
        return self.ask({"bench": bench, "mode": mode, "reps": reps, "dir": d, "dump": dump})

    def ask(self, req):
        """Send one request (torch_bench.py's protocol); its answer, or NA."""
        if self.dead:
            return NA(self.dead)
        mode = req.get("mode")
        try:
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()
        except OSError as e:
            self.dead = f"torch_bench.py died: {e}"
            return NA(self.dead)
        ans = self._answer(CALL_TIMEOUT)
        if ans is None:
            self.dead = "torch_bench.py died or timed out: " + self._tail()
            self.close()
            return NA(self.dead)
        if not ans.get("ok"):
            return NA(("torch.compile failed: " if "compile" in (mode or "") else "failed: ")
                      + ans.get("error", "?"))
        return ans

    def close(self):
        if getattr(self, "proc", None) and self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()


def env_for(threads):
    env = dict(os.environ)
    env.update({"GLIBC_TUNABLES": TUNABLES,
                "OPENBLAS_NUM_THREADS": str(threads), "OMP_NUM_THREADS": str(threads),
                "MKL_NUM_THREADS": str(threads)})
    if CORETYPE:
        env["OPENBLAS_CORETYPE"] = CORETYPE
    else:
        env.pop("OPENBLAS_CORETYPE", None)
    return env


def find_torch(no_venv):
    """(python, description) of a Python that imports torch, or (None, reason).

    TCOMP_BENCH_VENV names an existing virtualenv; otherwise bench/.venv,
    created with /usr/bin/python3 -m venv and `pip install torch` when
    missing (not with --no-venv); failing that, Debian's python3-torch
    under /usr/bin/python3."""
    def has_torch(python):
        rc, out, err = run([python, os.path.join(BENCH, "torch_bench.py"), "--info"],
                           timeout=300)
        info = json_line(out)
        return info if info and info.get("ok") else (info or {}).get("error") or first_line(err)

    tried = []
    user = os.environ.get("TCOMP_BENCH_VENV")
    if user:
        py = os.path.join(user, "bin", "python")
        info = has_torch(py) if os.path.exists(py) else f"{py} does not exist"
        if isinstance(info, dict):
            return py, info
        tried.append(f"TCOMP_BENCH_VENV={user}: {info}")
    else:
        venv = os.path.join(BENCH, ".venv")
        py = os.path.join(venv, "bin", "python")
        info = has_torch(py) if os.path.exists(py) else "no bench/.venv"
        if not isinstance(info, dict) and not no_venv:
            log("compare.py: setting up bench/.venv with torch from PyPI (a large download, once)")
            ok = os.path.exists(py) or run(["/usr/bin/python3", "-m", "venv", venv],
                                           timeout=600)[0] == 0
            if ok:
                rc, _, err = run([os.path.join(venv, "bin", "pip"), "install", "torch"],
                                 timeout=3600)
                info = has_torch(py) if rc == 0 else "pip install torch failed: " + first_line(err)
            else:
                info = "/usr/bin/python3 -m venv failed (python3-venv installed?)"
        if isinstance(info, dict):
            return py, info
        tried.append(f"bench/.venv: {info}")
    if os.path.exists("/usr/bin/python3"):
        info = has_torch("/usr/bin/python3")
        if isinstance(info, dict):
            info["debian"] = True
            return "/usr/bin/python3", info
        tried.append(f"/usr/bin/python3: {info}")
    return None, "no torch (" + "; ".join(tried) + ")"


# ---- the run ---------------------------------------------------------------

BUSY = 0.25   # cores used on average by other processes that make a block suspect
HZ = os.sysconf("SC_CLK_TCK")


def cpu_sample():
    """(wall seconds, CPU ticks of the whole machine, CPU ticks of this script
    and all its descendants, finished or alive) for others_cores."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    busy = sum(v[:3]) + sum(v[5:8])       # user nice system, irq softirq steal
    t = os.times()
    ours = (t.user + t.system + t.children_user + t.children_system) * HZ
    parent, ticks = {}, {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(pid)] = int(fields[1])
        ticks[int(pid)] = sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    me = os.getpid()
    for pid in ticks:
        p, seen = parent.get(pid), 0
        while p and p != me and seen < 64:
            p, seen = parent.get(p), seen + 1
        if p == me and pid != me:
            ours += ticks[pid]
    return time.time(), busy, ours


def others_cores(s0, s1):
    """Cores used on average by processes other than ours between two samples."""
    wall = max(s1[0] - s0[0], 1e-3)
    return max(0.0, ((s1[1] - s0[1]) - (s1[2] - s0[2])) / HZ / wall)

def select(benches, only, quick):
    if quick:
        benches = [b for b in benches if b["quick"]]
    if not only:
        return benches
    chosen = []
    for tok in [t for t in only.split(",") if t]:
        hit = [b for b in benches if b["name"] == tok or b["name"].startswith(tok + "_")
               or b["entry"] == tok]
        if not hit:
            raise SystemExit(f"compare.py: --only {tok}: no such benchmark; there are: "
                             + ", ".join(b["name"] for b in benches))
        chosen += [b for b in hit if b not in chosen]
    return [b for b in benches if b in chosen]


def outputs(bench):
    """The output tensors of a benchmark, in the def's order."""
    return bench.get("outputs") or [bench["output"]]


# The file prefix of each contender's dumped outputs in the work folder.
OUT_PREFIX = {"tcomp": "tcomp", "openblas": "openblas", "naive": "naive",
              "eager": "torch_eager", "compile": "torch_compile"}


def out_path(d, contender, tensor):
    """Where a contender's output tensor goes: d/out_<contender>_<name>.npy."""
    return os.path.join(d, f"out_{OUT_PREFIX[contender]}_{tensor['name']}.npy")


def verify(bl, tc, bench, threads, d, have):
    """Compare every output of every contender in d with the naive C one; a
    list of problems (empty when all agree) and a dict contender -> the
    largest rel error over the outputs."""
    tout = tc.output(bench, threads, d)
    outs = outputs(bench)
    ref_name = "naive" if all(os.path.exists(out_path(d, "naive", t)) for t in outs) \
        else "openblas"
    problems, rel = [], {}
    if isinstance(tout, NA) and have.get("tcomp"):
        problems.append(f"tcomp: {tout.reason}")
    if not all(os.path.exists(out_path(d, ref_name, t)) for t in outs):
        return ["no reference output (naive C and OpenBLAS both missing)"], rel
    for c in CONTENDERS:
        if c == ref_name or not have.get(c) or (c == "tcomp" and isinstance(tout, NA)):
            continue
        for t in outs:
            name = TITLES[c] + (f" {t['name']}" if len(outs) > 1 else "")
            path = out_path(d, c, t)
            if not os.path.exists(path):
                problems.append(f"{name}: no output written")
                continue
            r = bl.compare(out_path(d, ref_name, t), path)
            if "error" in r:
                problems.append(f"{name}: {r['error']}")
                continue
            rel[c] = max(rel.get(c, 0.0), r["rel"])
            if not r["shape_ok"]:
                problems.append(f"{name}: shape ({r['out_shape']}) differs from "
                                f"{TITLES[ref_name]}'s ({r['ref_shape']})")
            elif r["nonfinite"] or r["rel"] > REL_TOL:
                problems.append(f"{name} differs from {TITLES[ref_name]}: max abs diff "
                                f"{r['max_abs_diff']:.3g} (max |ref| {r['max_abs_ref']:.3g}, "
                                f"rel {r['rel']:.2g}), {r['nonfinite']} non-finite values")
    return problems, rel


def fmt_ms(x):
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    if x >= 1:
        return f"{x:.2f}"
    return f"{x:.3g}"


def fmt_ratio(base, t):
    return f"{base / t:.2f}x" if base is not None and t else "–"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="See bench/README.md.")
    ap.add_argument("--quick", action="store_true",
                    help="2 rounds, fewer runs, sgemm up to 1024")
    ap.add_argument("--threads", default="1,2", help="thread counts (default 1,2)")
    ap.add_argument("--only", help="NAME[,NAME]: benchmarks whose name is NAME or starts "
                    "with NAME_, or whose tcomp def is NAME")
    ap.add_argument("--rounds", type=int, help="round-robin rounds (default 3, quick 2)")
    ap.add_argument("--reps", type=int, help="timed runs per measurement for the "
                    "baselines and torch (default 5, quick 3)")
    ap.add_argument("--options", help="tcomp mapping options file (default: none)")
    ap.add_argument("--tcomp", default=os.environ.get("TCOMP", os.path.join(REPO, "build", "tcomp")),
                    help="the tcomp binary (default $TCOMP, else build/tcomp)")
    ap.add_argument("--no-write", action="store_true", help="print only, leave docs alone")
    ap.add_argument("--no-venv", action="store_true",
                    help="do not create bench/.venv nor pip install torch")
    ap.add_argument("--no-torch", action="store_true", help="leave PyTorch out")
    ap.add_argument("--json-out", help="also write every measurement to this JSON file")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (inputs, outputs)")
    ap.add_argument("--retries", type=int, default=1,
                    help="measure a benchmark again when other processes used more than "
                    f"{BUSY} cores meanwhile, at most this many times (default 1)")
    a = ap.parse_args()

    try:
        thread_counts = [int(t) for t in a.threads.split(",") if t]
        assert thread_counts and all(t >= 1 for t in thread_counts)
    except (ValueError, AssertionError):
        raise SystemExit(f"compare.py: --threads {a.threads}: expected numbers like 1,2")
    rounds = a.rounds or (2 if a.quick else 3)
    reps = a.reps or (3 if a.quick else 5)
    tcomp_path = os.path.abspath(a.tcomp)
    options = os.path.abspath(a.options) if a.options else None
    started = time.time()
    load_before = open("/proc/loadavg").read().split()[:3]
    # The source state when the run starts (the nearest to the binary's build).
    commit = git("rev-parse", "--short", "HEAD") or "?"
    # Tracked files changed but not committed, leaving out the benchmarks and
    # the docs (which do not go into the binary).
    dirty = [p for p in (l[3:] for l in git("status", "--porcelain", "--untracked-files=no",
                                             strip=False).splitlines() if l.strip())
             if not p.startswith(("bench/", "docs/")) and not p.endswith(".md")]
    workdir = tempfile.mkdtemp(prefix="tcomp-compare-")
    try:
        return run_all(a, workdir, thread_counts, rounds, reps, tcomp_path, options, started,
                       load_before, commit, dirty)
    finally:
        if not a.keep:
            shutil.rmtree(workdir, ignore_errors=True)


def run_all(a, workdir, thread_counts, rounds, reps, tcomp_path, options, started,
            load_before, commit, dirty):
    """Build the baselines, measure every benchmark, print and write the table."""
    bl = Baselines(workdir)
    benches = select(bl.list(), a.only, a.quick)
    tc = Tcomp(tcomp_path, options, a.quick)
    if tc.broken:
        log("compare.py: tcomp n/a: " + tc.broken)
    if a.no_torch:
        py, tinfo = None, "left out (--no-torch)"
    else:
        py, tinfo = find_torch(a.no_venv)
    if py is None:
        log("compare.py: torch n/a: " + tinfo)
    servers = {}

    def measure_block(b, threads, d, first, attempt):
        """All rounds of all contenders for benchmark b at this thread count."""
        samples = {c: [] for c in CONTENDERS}
        na, extra = {}, {}
        cpu0 = cpu_sample()
        for r in range(rounds):
            dump = r == 0 and first
            order = CONTENDERS[r % len(CONTENDERS):] + CONTENDERS[:r % len(CONTENDERS)]
            for c in order:
                if c in na:
                    continue
                if c == "tcomp":
                    m = tc.measure(b, threads)
                elif c in ("openblas", "naive"):
                    m = bl.measure(c, b, threads, reps, d if dump else None)
                elif py is None:
                    m = NA(tinfo)
                else:
                    m = servers[threads].measure(c, b, reps, d, dump)
                if isinstance(m, NA):
                    na[c] = m.reason
                    continue
                samples[c].append(m["median_ms"])
                if c == "tcomp":
                    extra["options"] = m.get("options")
                    extra.setdefault("compile_ms", []).append(m.get("compile_ms"))
                if c == "compile":
                    extra.setdefault("compile_first_call_s", m.get("first_call_s"))
            log(f"[{benches.index(b) + 1}/{len(benches)}] {b['name']} threads={threads} round "
                f"{r + 1}/{rounds}" + (f" (again, {attempt + 1})" if attempt else "") + ": "
                + ", ".join(f"{c} {fmt_ms(samples[c][-1])} ms" if c not in na and samples[c]
                            else f"{c} n/a" for c in CONTENDERS))
        return {"bench": b, "threads": threads, "samples": samples, "na": na,
                "ms": {c: statistics.median(v) for c, v in samples.items() if v},
                "others": others_cores(cpu0, cpu_sample()), "attempts": attempt + 1, **extra}

    results = []    # one dict per (benchmark, threads)
    try:
        for b in benches:
            d = os.path.join(workdir, b["name"])
            os.makedirs(d, exist_ok=True)
            bl.inputs(b, d)
            for ti, threads in enumerate(thread_counts):
                if py and threads not in servers:
                    servers[threads] = TorchServer(py, threads)
                tries = []
                for attempt in range(a.retries + 1):
                    tries.append(measure_block(b, threads, d, ti == 0, attempt))
                    if tries[-1]["others"] <= BUSY or attempt == a.retries:
                        break
                    log(f"compare.py: other processes used {tries[-1]['others']:.2f} cores "
                        f"during {b['name']} threads={threads}: measuring it again")
                row = min(tries, key=lambda t: t["others"])   # the quietest attempt
                row["attempts"] = len(tries)
                if ti == 0:
                    have = {c: c in row["ms"] for c in CONTENDERS}
                    row["problems"], row["rel"] = verify(bl, tc, b, threads, d, have)
                    for p in row["problems"]:
                        log(f"WARNING: {b['name']}: {p}")
                results.append(row)
            if not a.keep:
                shutil.rmtree(d, ignore_errors=True)
    finally:
        for s in servers.values():
            s.close()

    meta = {
        "started": started, "seconds": time.time() - started,
        "load_before": load_before, "load_after": open("/proc/loadavg").read().split()[:3],
        "rounds": rounds, "reps": reps, "threads": thread_counts,
        "torch": tinfo if py else None, "torch_na": None if py else tinfo,
        "tcomp": tcomp_path, "tcomp_runs": (tc.runs, tc.min_time), "options": options,
        "commit": commit, "dirty": dirty,
        "baselines": bl,
    }
    text = report(results, meta, a)
    print(text)
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump([{k: (v if k != "bench" else v["name"]) for k, v in r.items()}
                       for r in results], f, indent=1)
    if not a.no_write:
        write_doc(text)
        log(f"compare.py: table written to {os.path.relpath(DOC, os.getcwd())}")
    return 0


# ---- the report ------------------------------------------------------------

def git(*args, strip=True):
    rc, out, _ = run(["git", "-C", REPO, *args])
    return (out.strip() if strip else out) if rc == 0 else ("" if not strip else None)


def machine():
    model, cores = "?", os.cpu_count()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {cores} cores ({platform.system()} {platform.release()})"


def command_line():
    env = " ".join(f"{k}={shlex.quote(os.environ[k])}" for k in ("TCOMP_BENCH_VENV", "TCOMP")
                   if os.environ.get(k))
    cmd = " ".join(shlex.quote(x) for x in ["python3", "bench/compare.py", *sys.argv[1:]])
    return (env + " " + cmd) if env else cmd


def report(results, meta, a):
    bl = meta["baselines"]
    notes = []   # footnote texts, numbered in order of first use

    def note(text):
        if text not in notes:
            notes.append(text)
        return f"n/a [{notes.index(text) + 1}]"

    head = ["benchmark", "threads", "tcomp ms", "tcomp rate", "OpenBLAS ms", "naive C ms",
            "torch eager ms", "torch.compile ms", "vs OpenBLAS", "vs naive", "vs eager",
            "vs compile", "check"]
    rows = []
    options = set()
    for r in results:
        b, ms = r["bench"], r["ms"]
        t = ms.get("tcomp")
        cells = [b["name"], str(r["threads"])]
        if r["others"] > BUSY:
            cells[1] += " (busy " + note(
                f"other processes used {r['others']:.2f} cores on average while "
                f"{b['name']} ran at {r['threads']} thread{'s' if r['threads'] > 1 else ''}"
                + (f" ({r['attempts']} attempts)" if r["attempts"] > 1 else "")
                + ": its times are suspect").replace("n/a ", "") + ")"
        if r.get("options"):
            options.add(r["options"])
        for c in CONTENDERS:
            why = r["na"].get(c, "?")
            who = "PyTorch" if why == meta["torch_na"] else TITLES[c]
            cells.append(fmt_ms(ms[c]) if c in ms else note(f"{who}: {why}"))
            if c == "tcomp":
                if t is None:
                    cells.append("–")
                elif b["metric"] == "gflops":
                    cells.append(f"{b['flops'] / t / 1e6:.1f} GFLOP/s")
                else:
                    cells.append(f"{b['bytes'] / t / 1e6:.1f} GB/s")
        for c in CONTENDERS[1:]:
            cells.append(fmt_ratio(ms.get(c), t))
        if "problems" not in r:
            cells.append("(checked at %d thr.)" % results[0]["threads"])
        elif r["problems"]:
            cells.append("**MISMATCH** " + note("check: " + b["name"] + ": " +
                                                "; ".join(r["problems"])).replace("n/a ", ""))
        else:
            worst = max(r["rel"].values()) if r["rel"] else 0
            cells.append((f"ok ({worst:.0e})" if worst else "ok (exact)") if r["rel"] else "ok")
        rows.append(cells)

    now = datetime.datetime.fromtimestamp(meta["started"], datetime.timezone.utc)
    try:
        built = datetime.datetime.fromtimestamp(os.path.getmtime(meta["tcomp"]),
                                                datetime.timezone.utc)
        built = f", built {built:%Y-%m-%d %H:%M} UTC"
    except OSError:
        built = ""
    dirty = meta["dirty"]
    tinfo = meta["torch"]
    if tinfo:
        torch_text = (f"torch {tinfo['version']} (BLAS {tinfo.get('blas', '?')}, CPU capability "
                      f"{tinfo.get('cpu_capability', '?')}), Python `{tinfo.get('python')}`"
                      + (" (Debian python3-torch)" if tinfo.get("debian") else "")
                      + "; torch.compile with the default inductor backend and mode")
    else:
        torch_text = "not measured: " + meta["torch_na"]
    binfo = bl.info
    blas_text = (f"{binfo.get('config')}, core `{binfo.get('corename')}` "
                 + (f"with `OPENBLAS_CORETYPE={CORETYPE}`" if CORETYPE
                    else "(OpenBLAS's own detection: no AVX-512 on this host)")
                 if binfo.get("openblas")
                 else "not measured: " + (bl.openblas or "?"))
    tc_runs, tc_min = meta["tcomp_runs"]
    lines = [
        f"Generated by `bench/compare.py`; do not edit by hand between the markers.",
        "",
        f"- Machine: {machine()}; load average {' '.join(meta['load_before'])} before, "
        f"{' '.join(meta['load_after'])} after.",
        f"- Date: {now:%Y-%m-%d %H:%M} UTC; the run took {meta['seconds'] / 60:.1f} min.",
        f"- Command: `{command_line()}`",
        f"- tcomp: commit {meta['commit']} at the start of the run"
        + (" with uncommitted changes to " + ", ".join(f"`{p}`" for p in dirty[:6])
           + (" ..." if len(dirty) > 6 else "") if dirty else " (no uncommitted source changes)")
        + f"; binary `{meta['tcomp']}`{built}; options "
        + (", ".join(f"`{o}`" for o in sorted(options)) or "?")
        + (f" (from `{meta['options']}`)" if meta["options"] else " (defaults)")
        + f"; `tcomp bench --runs {tc_runs} --min-time {tc_min} --json`.",
        f"- OpenBLAS: {blas_text}; for the batch matmul, conv2d and group convolution (im2col + "
        "sgemm per image or group), Kronecker and attention loops OpenBLAS runs on one thread "
        "and a pthread pool splits the loop.",
        f"- naive C: `bench/baselines.c`, {bl.gcc}, `{' '.join(bl.flags)}`; at N > 1 threads "
        "the outermost loop is split into N equal chunks over pthreads.",
        f"- PyTorch: {torch_text}.",
        f"- Environment of every contender: `GLIBC_TUNABLES={TUNABLES}`, "
        "`OPENBLAS_NUM_THREADS`, `OMP_NUM_THREADS` and `MKL_NUM_THREADS` set to the thread count.",
        f"- Method: {meta['rounds']} round-robin round{'s' if meta['rounds'] > 1 else ''} "
        "(each contender once per round, the order rotated); each cell is the median over the "
        "rounds of that contender's median time of a run: tcomp as `tcomp bench` times it, the "
        f"others after a warm-up over at least {meta['reps']} runs and 0.2 s, no more runs once "
        "3 s have passed (a single run over 1 s is its own sample; a first run of 0.25 s or more "
        "caps the timed runs at 2). A benchmark during which "
        f"other processes used more than {BUSY} cores on average (from /proc) is measured again "
        "once, and marked \"busy\" if it still was. "
        "\"vs X\" is the tcomp speed-up, X's time / tcomp's time (above 1: tcomp is faster). "
        "The rate is tcomp's: GFLOP/s counting a multiply-add as 2 (bias, ReLU not counted), or "
        "GB/s of inputs read plus outputs written once. \"check\": every output on the same inputs "
        f"against the naive C one (each output of a def with several), max |diff| / max |naive| "
        f"(tolerance {REL_TOL:g}), with the largest of these shown.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "|".join("---" for _ in head) + "|",
    ]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    if notes:
        lines.append("")
        lines += [f"[{i + 1}] {n}" + ("  " if i + 1 < len(notes) else "") for i, n in enumerate(notes)]
    return "\n".join(lines)


def write_doc(text):
    with open(DOC) as f:
        doc = f.read()
    if BEGIN not in doc or END not in doc:
        doc = doc.rstrip("\n") + f"\n\n{SECTION}\n\n{BEGIN}\n{END}\n"
    start = doc.index(BEGIN) + len(BEGIN)
    end = doc.index(END, start)
    doc = doc[:start] + "\n" + text + "\n" + doc[end:]
    with open(DOC, "w") as f:
        f.write(doc)


if __name__ == "__main__":
    sys.exit(main())
