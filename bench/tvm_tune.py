#!/usr/bin/env python3
"""tcomp's autotuner against Apache TVM's MetaSchedule, on the same wall-time budget.

    python3 bench/tvm_tune.py [--budget SECONDS] [--only matmul,conv2d] [--rounds R]
                              [--tcomp PATH] [--venv DIR] [--mcpu CPU] [--seed N]
                              [--no-write] [--json-out FILE] [--keep]

For each kernel (matmul 1024x1024x1024 and the conv2d of bench/kernels.tc:
N=8, C=64, H=W=56, F=64, 3x3, valid, stride 1, bias; all float32):

  1. TVM: MetaSchedule (`tune_tir`, its defaults: evolutionary search, XGBoost
     cost model, local builder and runner; 32 trials per iteration, not 64,
     so that less is lost at the deadline) on the
     llvm target {"kind": "llvm", "mcpu": MCPU, "num-cores": 1} with
     TVM_NUM_THREADS=1, in a process of its own that is killed when the
     budget is spent (every measured trial is already in the JSON database
     of its work folder); then the best record is compiled;
  2. tcomp: `tcomp autotune bench/kernels.tc -e DEF --shape ... --option
     threads=1 --population 20 --generations 100000 --cache FILE`, stopped
     with SIGINT when the same budget is spent (it keeps the best found and
     records it in FILE, a private cache file of this run);
  3. R rounds, the order alternating, of `tcomp bench ... --cache FILE --json`
     (its "source" must be "cache": tcomp bench reads the cache only when no
     option is given; threads=1 is in the tuned options) and TVM's
     time_evaluator (number 1, at least 10 repeats and 0.5 s) on the built
     module, in one server process; the cell is the median over the rounds
     of the medians.

TVM's output is checked against NumPy (float64) on random inputs, and
tcomp's tuned kernel (`tcomp run --cache FILE`) on the same inputs.  TVM
comes from PyPI (`apache-tvm`, plus `xgboost` and `psutil`, which MetaSchedule needs) in a
virtualenv: --venv, else $TCOMP_TVM_VENV, else ~/.cache/tcomp/tvm-venv,
created with `/usr/bin/python3 -m venv` when missing.  When TVM cannot be
installed or run, the section says why, with the error.  The figures go
between <!-- bench:tvm:begin --> and <!-- bench:tvm:end --> of
docs/performance.md (unless --no-write).  This file is also the TVM side
(`--worker ...`, run by the virtualenv's Python).  See bench/README.md.
"""

import argparse
import datetime
import json
import math
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH)
DOC = os.path.join(REPO, "docs", "performance.md")
BEGIN, END = "<!-- bench:tvm:begin -->", "<!-- bench:tvm:end -->"
SECTION = "## Against TVM MetaSchedule"
REL_TOL = 1e-4
# apache-tvm 0.27.0.post1 asks for apache-tvm-ffi>=0.1.14.post0, but with 0.1.15.post2 (the
# newest in 2026-11) tvm.ir.save_json, which MetaSchedule's database calls on the first
# workload, segfaults in tvm::ffi::ToJSONGraph: hence the pin.  xgboost (the cost model),
# psutil and cloudpickle (the popen pool) are the extras MetaSchedule needs.
PIP_PACKAGES = ["apache-tvm", "apache-tvm-ffi==0.1.14.post0", "numpy", "xgboost", "psutil",
                "cloudpickle"]

# The kernels: tcomp def in bench/kernels.tc, shapes, output shape, flops.
KERNELS = {
    "matmul": {"entry": "matmul", "inputs": [("A", (1024, 1024)), ("B", (1024, 1024))],
               "output": ("C", (1024, 1024)), "flops": 2 * 1024 ** 3},
    "conv2d": {"entry": "conv2d",
               "inputs": [("I", (8, 64, 56, 56)), ("W1", (64, 64, 3, 3)), ("B", (64,))],
               "output": ("O", (8, 64, 54, 54)), "flops": 2 * 8 * 64 * 54 * 54 * 64 * 9},
}


# ============================================================================
# The TVM side: run by the virtualenv's Python as `tvm_tune.py --worker ...`
# ============================================================================

def tvm_target(mcpu):
    import tvm
    return tvm.target.Target({"kind": "llvm", "mcpu": mcpu, "num-cores": 1})


def tvm_func(kernel):
    from tvm import te
    if kernel == "matmul":
        A = te.placeholder((1024, 1024), "float32", name="A")
        B = te.placeholder((1024, 1024), "float32", name="B")
        k = te.reduce_axis((0, 1024), "k")
        C = te.compute((1024, 1024), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
        return te.create_prim_func([A, B, C])
    n, c, h, w, f, kh, kw = 8, 64, 56, 56, 64, 3, 3
    I = te.placeholder((n, c, h, w), "float32", name="I")
    W = te.placeholder((f, c, kh, kw), "float32", name="W1")
    Bb = te.placeholder((f,), "float32", name="B")
    rc = te.reduce_axis((0, c), "rc")
    rh = te.reduce_axis((0, kh), "rh")
    rw = te.reduce_axis((0, kw), "rw")
    conv = te.compute((n, f, h - kh + 1, w - kw + 1),
                      lambda b, o, y, x: te.sum(I[b, rc, y + rh, x + rw] * W[o, rc, rh, rw],
                                                axis=[rc, rh, rw]), name="conv")
    O = te.compute(conv.shape, lambda b, o, y, x: conv[b, o, y, x] + Bb[o], name="O")
    return te.create_prim_func([I, W, Bb, O])


def reference(kernel, ins):
    import numpy as np
    if kernel == "matmul":
        return ins[0].astype(np.float64) @ ins[1].astype(np.float64)
    I, W, B = (x.astype(np.float64) for x in ins)
    win = np.lib.stride_tricks.sliding_window_view(I, (3, 3), axis=(2, 3))  # n c h w i j
    return np.einsum("nchwij,fcij->nfhw", win, W, optimize=True) + B[None, :, None, None]


def rel_err(ref, out):
    import numpy as np
    if ref.shape != out.shape:
        return float("inf")
    if not np.all(np.isfinite(out)):
        return float("inf")
    return float(np.max(np.abs(out - ref)) / max(np.max(np.abs(ref)), 1e-30))


def worker_info():
    info = {"ok": False}
    try:
        import numpy
        import tvm
        from tvm.target import codegen
        from tvm.s_tir import meta_schedule  # noqa: F401
        info.update(ok=True, tvm=tvm.__version__, numpy=numpy.__version__,
                    llvm=codegen.llvm_version_major(), host_cpu=codegen.llvm_get_system_cpu(),
                    triple=codegen.llvm_get_system_triple(), python=sys.executable)
        info["znver5"] = bool(codegen.llvm_is_valid_cpu("znver5", info["triple"]))
        import tvm_ffi
        info["tvm_ffi"] = getattr(tvm_ffi, "__version__", "?")
        try:  # MetaSchedule needs these at tuning time, not at import
            import cloudpickle  # noqa: F401
            import psutil  # noqa: F401
            import xgboost
            info["xgboost"] = xgboost.__version__
        except ImportError as e:
            info["xgboost"] = None
            info["xgboost_error"] = str(e)
    except Exception as e:  # noqa: BLE001  (any failure is the answer)
        info["error"] = f"{type(e).__name__}: {e}"
    print(json.dumps(info), flush=True)


def worker_tune(kernel, workdir, mcpu, seed):
    from tvm.s_tir import meta_schedule as ms
    ms.tune_tir(mod=tvm_func(kernel), target=tvm_target(mcpu), work_dir=workdir,
                max_trials_global=100000, num_trials_per_iter=32, seed=seed)


def clean_database(workdir):
    """Drop lines a kill may have cut short from the JSON database files."""
    for name in ("database_workload.json", "database_tuning_record.json"):
        p = os.path.join(workdir, name)
        if not os.path.exists(p):
            continue
        good = []
        with open(p) as f:
            for line in f:
                try:
                    json.loads(line)
                    good.append(line if line.endswith("\n") else line + "\n")
                except ValueError:
                    pass
        with open(p, "w") as f:
            f.writelines(good)


def worker_serve(kernel, workdir, mcpu):
    """Build the best record and answer timing requests, one JSON line each."""
    import numpy as np
    import tvm
    from tvm.s_tir import meta_schedule as ms

    def answer(obj):
        print(json.dumps(obj), flush=True)

    try:
        clean_database(workdir)
        db = ms.database.JSONDatabase(work_dir=workdir)
        recs = db.get_all_tuning_records()
        ok = [r for r in recs if r.run_secs and all(0 < float(x) < 1e9 for x in r.run_secs)]
        target = tvm_target(mcpu)
        func = tvm_func(kernel)
        sch = ms.tir_integration.compile_tir(db, func, target)
        if sch is None:
            answer({"ok": False, "error": f"no usable tuning record ({len(recs)} records)"})
            return
        lib = tvm.compile(sch.mod, target=target)
        dev = tvm.cpu(0)
        rng = np.random.default_rng(0)
        spec = KERNELS[kernel]
        ins = [rng.uniform(-1, 1, shape).astype("float32") for _, shape in spec["inputs"]]
        for (name, _), x in zip(spec["inputs"], ins):
            np.save(os.path.join(workdir, f"in_{name}.npy"), x)
        args = [tvm.runtime.tensor(x, dev) for x in ins]
        args.append(tvm.runtime.tensor(np.zeros(spec["output"][1], "float32"), dev))
        lib["main"](*args)
        ref = reference(kernel, ins)
        tvm_rel = rel_err(ref, args[-1].numpy().astype(np.float64))
        best_rec = min((float(np.median([float(x) for x in r.run_secs])) for r in ok),
                       default=None)
        ev1 = lib.mod.time_evaluator("main", dev, number=1, repeat=3)
        est = max(ev1(*args).median, 1e-6)
        answer({"ok": True, "records": len(recs), "valid_records": len(ok),
                "best_record_ms": best_rec * 1e3 if best_rec else None,
                "rel_err": tvm_rel, "estimate_ms": est * 1e3,
                "trace": str(sch.trace)[:20000] if sch.trace is not None else None})
    except Exception as e:  # noqa: BLE001
        answer({"ok": False, "error": f"{type(e).__name__}: {e}"})
        return
    for line in sys.stdin:
        try:
            req = json.loads(line)
            if req.get("cmd") == "time":
                reps = max(int(req.get("min_runs", 10)),
                           math.ceil(float(req.get("min_time", 0.5)) / est))
                ev = lib.mod.time_evaluator("main", dev, number=1, repeat=reps)
                r = ev(*args)
                res = [float(x) * 1e3 for x in r.results]
                answer({"ok": True, "median_ms": statistics.median(res), "min_ms": min(res),
                        "runs": len(res)})
            elif req.get("cmd") == "cmp":
                out = np.load(req["path"]).astype(np.float64)
                answer({"ok": True, "rel_err": rel_err(ref, out)})
            else:
                answer({"ok": False, "error": "unknown request"})
        except Exception as e:  # noqa: BLE001
            answer({"ok": False, "error": f"{type(e).__name__}: {e}"})


# ============================================================================
# The driver: any python3, standard library only
# ============================================================================

def log(msg):
    print(msg, file=sys.stderr, flush=True)


def first_line(text, limit=300):
    lines = [l.strip() for l in (text or "").strip().splitlines() if l.strip()]
    return (lines[-1] if lines else "no message")[:limit]


def _compare():
    """bench/compare.py as a module (its run, json_line, env_for), imported
    without writing bench/__pycache__ into the work tree."""
    sys.dont_write_bytecode = True
    if BENCH not in sys.path:
        sys.path.insert(0, BENCH)
    import compare
    return compare


def run(cmd, env=None, timeout=3600):
    """compare.run with a longer default timeout (pip, tuning)."""
    return _compare().run(cmd, env=env, timeout=timeout)


def json_line(text):
    return _compare().json_line(text)


def base_env():
    # the same glibc malloc tunables and thread variables as compare.py
    env = _compare().env_for(1)
    env["TVM_NUM_THREADS"] = "1"
    return env


def find_tvm(venv):
    """(python, info) or (None, reason): the venv's Python when it imports tvm,
    after creating the venv and installing PIP_PACKAGES when needed."""
    py = os.path.join(venv, "bin", "python")
    me = os.path.abspath(__file__)

    def probe():
        rc, out, err = run([py, me, "--worker", "info"], timeout=600)
        info = json_line(out)
        if info and info.get("ok"):
            return info
        return (info or {}).get("error") or f"exit {rc}: {first_line(err)}"

    info = probe() if os.path.exists(py) else f"no virtualenv at {venv}"
    if isinstance(info, dict) and info.get("xgboost") and info.get("tvm_ffi") == "0.1.14.post0":
        return py, info
    log(f"tvm_tune.py: setting up {venv}: pip install {' '.join(PIP_PACKAGES)} (PyPI)")
    if not os.path.exists(py):
        rc, _, err = run(["/usr/bin/python3", "-m", "venv", venv], timeout=600)
        if rc != 0:
            return None, f"`/usr/bin/python3 -m venv {venv}` failed: {first_line(err)}"
    rc, out, err = run([os.path.join(venv, "bin", "pip"), "install", *PIP_PACKAGES],
                       timeout=3600)
    if rc != 0:
        return None, f"`pip install {' '.join(PIP_PACKAGES)}` failed: {first_line(err or out)}"
    info = probe()
    if isinstance(info, dict):
        return py, info
    return None, f"`import tvm` failed after pip install: {info}"


def shape_args(spec):
    out = []
    for name, shape in spec["inputs"]:
        out += ["--shape", f"{name}=" + "x".join(map(str, shape))]
    return out


def kill_group(proc, sig, grace):
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def tune_tvm(py, kernel, workdir, budget, mcpu, seed, env):
    logf = open(os.path.join(workdir, "tvm-tune.log"), "w")
    t0 = time.monotonic()
    proc = subprocess.Popen([py, os.path.abspath(__file__), "--worker", "tune", "--kernel", kernel,
                             "--workdir", workdir, "--mcpu", mcpu, "--seed", str(seed)],
                            stdout=logf, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)
    try:
        proc.wait(timeout=budget)
        finished = True
    except subprocess.TimeoutExpired:
        finished = False
        kill_group(proc, signal.SIGTERM, 10)
    wall = time.monotonic() - t0
    logf.close()
    return {"wall_s": wall, "finished": finished, "rc": proc.returncode}


def tune_tcomp(exe, kernel, cache, budget, seed, env, workdir):
    spec = KERNELS[kernel]
    cmd = [exe, "autotune", os.path.join(BENCH, "kernels.tc"), "-e", spec["entry"],
           *shape_args(spec), "--option", "threads=1", "--population", "20",
           "--generations", "100000", "--seed", str(seed), "--cache", cache]
    out = open(os.path.join(workdir, "tcomp-autotune.out"), "w+")
    err = open(os.path.join(workdir, "tcomp-autotune.log"), "w+")
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, start_new_session=True)
    stopped = False
    try:
        proc.wait(timeout=budget)
    except subprocess.TimeoutExpired:
        stopped = True
        proc.send_signal(signal.SIGINT)   # stops the search, keeps and prints the best
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            kill_group(proc, signal.SIGKILL, 10)
    wall = time.monotonic() - t0
    out.seek(0)
    text = out.read()
    err.seek(0)
    errtext = err.read()
    out.close()
    err.close()
    res = {"cmd": cmd, "wall_s": wall, "stopped": stopped, "rc": proc.returncode,
           "summary": [l[2:] for l in text.splitlines() if l.startswith("# ")][1:],
           "options": ";".join(l.strip() for l in text.splitlines()
                               if l.strip() and not l.startswith("#"))}
    if proc.returncode != 0:
        res["error"] = f"tcomp autotune exit {proc.returncode}: {first_line(errtext or text)}"
    return res


class Server:
    def __init__(self, py, kernel, workdir, mcpu, env):
        self.errlog = open(os.path.join(workdir, "tvm-serve.log"), "w")
        self.proc = subprocess.Popen([py, os.path.abspath(__file__), "--worker", "serve",
                                      "--kernel", kernel, "--workdir", workdir, "--mcpu", mcpu],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.errlog, text=True, env=env, bufsize=1)
        self.hello = self.read() or {"ok": False, "error": "the TVM server died (see its log)"}

    def read(self):
        line = self.proc.stdout.readline()
        return json.loads(line) if line else None

    def ask(self, req):
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        return self.read() or {"ok": False, "error": "the TVM server died"}

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.errlog.close()


def tcomp_bench(exe, kernel, cache, env):
    spec = KERNELS[kernel]
    cmd = [exe, "bench", os.path.join(BENCH, "kernels.tc"), "-e", spec["entry"],
           *shape_args(spec), "--cache", cache, "--runs", "10", "--min-time", "0.5", "--json"]
    rc, out, err = run(cmd, env=env, timeout=600)
    res = json_line(out)
    if rc == 0 and res and "median_ms" in res:
        return res
    return {"error": f"tcomp bench exit {rc}: {first_line(err or out)}"}


def tcomp_output(exe, kernel, cache, workdir, env):
    spec = KERNELS[kernel]
    out = os.path.join(workdir, "out_tcomp.npy")
    cmd = [exe, "run", os.path.join(BENCH, "kernels.tc"), "-e", spec["entry"]]
    for name, _ in spec["inputs"]:
        cmd += ["--in", f"{name}={os.path.join(workdir, 'in_' + name + '.npy')}"]
    cmd += ["--out", f"{spec['output'][0]}={out}", "--cache", cache]
    rc, _, err = run(cmd, env=env, timeout=600)
    return out if rc == 0 else {"error": f"tcomp run exit {rc}: {first_line(err)}"}


def cpu_busy():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return time.time(), sum(v[:3]) + sum(v[5:8])


def main():
    if "--worker" in sys.argv:
        wp = argparse.ArgumentParser()
        wp.add_argument("--worker", choices=["info", "tune", "serve"])
        wp.add_argument("--kernel", choices=list(KERNELS))
        wp.add_argument("--workdir")
        wp.add_argument("--mcpu", default="znver5")
        wp.add_argument("--seed", type=int, default=1)
        w = wp.parse_args()
        if w.worker == "info":
            worker_info()
        elif w.worker == "tune":
            worker_tune(w.kernel, w.workdir, w.mcpu, w.seed)
        else:
            worker_serve(w.kernel, w.workdir, w.mcpu)
        return 0

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budget", type=float, default=300,
                    help="wall-time budget of each tuner for each kernel, seconds (default 300)")
    ap.add_argument("--only", default="matmul,conv2d", help="kernels (default matmul,conv2d)")
    ap.add_argument("--rounds", type=int, default=5, help="round-robin rounds (default 5)")
    ap.add_argument("--tcomp", default=os.environ.get("TCOMP", os.path.join(REPO, "build", "tcomp")),
                    help="the tcomp binary (default $TCOMP, else build/tcomp)")
    ap.add_argument("--venv", default=os.environ.get("TCOMP_TVM_VENV") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "tcomp", "tvm-venv"),
        help="the virtualenv with apache-tvm (default $TCOMP_TVM_VENV, else "
        "~/.cache/tcomp/tvm-venv; created when missing)")
    ap.add_argument("--mcpu", help="LLVM CPU of TVM's target (default znver5 when TVM's LLVM "
                    "knows it, else the host CPU LLVM detects)")
    ap.add_argument("--seed", type=int, default=1, help="both tuners' seed (default 1)")
    ap.add_argument("--no-write", action="store_true", help="print only, leave docs alone")
    ap.add_argument("--json-out", help="also write every measurement to this JSON file")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    a = ap.parse_args()
    kernels = [k for k in a.only.split(",") if k]
    for k in kernels:
        if k not in KERNELS:
            raise SystemExit(f"tvm_tune.py: --only {k}: the kernels are {', '.join(KERNELS)}")
    exe = os.path.abspath(a.tcomp)
    if not os.access(exe, os.X_OK):
        raise SystemExit(f"tvm_tune.py: no tcomp binary at {exe} (build it, or pass --tcomp)")
    started = time.time()
    load_before = open("/proc/loadavg").read().split()[:3]
    env = base_env()
    py, info = find_tvm(os.path.abspath(a.venv))
    meta = {"started": started, "load_before": load_before, "budget": a.budget,
            "rounds": a.rounds, "tcomp": exe, "venv": os.path.abspath(a.venv)}
    rc, out, _ = run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"])
    meta["commit"] = out.strip() if rc == 0 else "?"
    results = []
    if py is None:
        meta["tvm_na"] = info
        log("tvm_tune.py: TVM n/a: " + info)
    else:
        meta["info"] = info
        mcpu = a.mcpu or ("znver5" if info.get("znver5") else info.get("host_cpu"))
        meta["mcpu"] = mcpu
        root = tempfile.mkdtemp(prefix="tcomp-tvm-")
        try:
            for k in kernels:
                results.append(one_kernel(k, py, exe, root, a, mcpu, env))
        finally:
            if a.keep:
                log(f"tvm_tune.py: work folder kept: {root}")
            else:
                shutil.rmtree(root, ignore_errors=True)
    meta["seconds"] = time.time() - started
    meta["load_after"] = open("/proc/loadavg").read().split()[:3]
    text = report(results, meta)
    print(text)
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump({"results": results, "meta": meta}, f, indent=1)
    if not a.no_write:
        write_doc(text)
        log(f"tvm_tune.py: written to {os.path.relpath(DOC, os.getcwd())}")
    return 0


def one_kernel(k, py, exe, root, a, mcpu, env):
    wd = os.path.join(root, k)
    os.makedirs(os.path.join(wd, "tvm"))
    cache = os.path.join(wd, "tcomp-cache.sqlite")
    row = {"kernel": k, "problems": []}
    s0 = cpu_busy()
    log(f"tvm_tune.py: {k}: TVM MetaSchedule for {a.budget:.0f} s ...")
    row["tvm_tune"] = tune_tvm(py, k, os.path.join(wd, "tvm"), a.budget, mcpu, a.seed, env)
    log(f"tvm_tune.py: {k}: tcomp autotune for {a.budget:.0f} s ...")
    row["tcomp_tune"] = tune_tcomp(exe, k, cache, a.budget, a.seed, env, wd)
    s1 = cpu_busy()
    row["tune_cores"] = (s1[1] - s0[1]) / os.sysconf("SC_CLK_TCK") / max(s1[0] - s0[0], 1e-3)
    if "error" in row["tcomp_tune"]:
        row["problems"].append(row["tcomp_tune"]["error"])
    log(f"tvm_tune.py: {k}: tcomp: " + "; ".join(row["tcomp_tune"]["summary"]))
    srv = Server(py, k, os.path.join(wd, "tvm"), mcpu, env)
    row["tvm"] = {x: y for x, y in srv.hello.items() if x != "trace"}
    if srv.hello.get("trace"):
        with open(os.path.join(wd, "tvm-best-trace.py"), "w") as f:
            f.write(srv.hello["trace"])
    if not srv.hello.get("ok"):
        row["problems"].append("TVM: " + srv.hello.get("error", "?"))
        log(f"tvm_tune.py: {k}: TVM n/a: {srv.hello.get('error')} (log: "
            + first_line(open(os.path.join(wd, "tvm", "tvm-tune.log")).read()) + ")")
    else:
        log(f"tvm_tune.py: {k}: TVM: {srv.hello['records']} records, best "
            f"{srv.hello.get('best_record_ms')} ms in tuning, rel err {srv.hello['rel_err']:.2g}")
        if srv.hello["rel_err"] > REL_TOL:
            row["problems"].append(f"TVM's output differs from NumPy's: rel {srv.hello['rel_err']:.3g}")
        o = tcomp_output(exe, k, cache, os.path.join(wd, "tvm"), env)
        if isinstance(o, dict):
            row["problems"].append(o["error"])
        else:
            c = srv.ask({"cmd": "cmp", "path": o})
            row["tcomp_rel_err"] = c.get("rel_err")
            if not c.get("ok") or c["rel_err"] > REL_TOL:
                row["problems"].append(f"tcomp's output differs from NumPy's: {c}")
    row["samples"] = {"tcomp": [], "tvm": []}
    m0 = cpu_busy()
    for r in range(a.rounds):
        order = ["tcomp", "tvm"] if r % 2 == 0 else ["tvm", "tcomp"]
        for who in order:
            if who == "tvm":
                if not srv.hello.get("ok"):
                    continue
                m = srv.ask({"cmd": "time", "min_runs": 10, "min_time": 0.5})
                if not m.get("ok"):
                    row["problems"].append("TVM timing: " + m.get("error", "?"))
                    continue
            else:
                m = tcomp_bench(exe, k, cache, env)
                if "error" in m:
                    row["problems"].append(m["error"])
                    continue
                row["tcomp_options"], row["tcomp_source"] = m.get("options"), m.get("source")
                row.setdefault("tcomp_compile_ms", []).append(m.get("compile_ms"))
            row["samples"][who].append(m["median_ms"])
        log(f"tvm_tune.py: {k}: round {r + 1}/{a.rounds}: " + ", ".join(
            f"{w} {row['samples'][w][-1]:.3f} ms" if row["samples"][w] else f"{w} n/a"
            for w in ("tcomp", "tvm")))
    m1 = cpu_busy()
    row["measure_cores"] = (m1[1] - m0[1]) / os.sysconf("SC_CLK_TCK") / max(m1[0] - m0[0], 1e-3)
    srv.close()
    if row.get("tcomp_source") not in (None, "cache"):
        row["problems"].append(f"tcomp bench's source was {row['tcomp_source']!r}, not 'cache'")
    if row.get("tcomp_options") and "threads=1" not in row["tcomp_options"].split(";"):
        row["problems"].append("the tuned tcomp kernel did not run with threads=1")
    for p in row["problems"]:
        log(f"WARNING: {k}: {p}")
    return row


def command_line():
    env = " ".join(f"{k}={shlex.quote(os.environ[k])}" for k in ("TCOMP_TVM_VENV", "TCOMP")
                   if os.environ.get(k))
    cmd = " ".join(shlex.quote(x) for x in ["python3", "bench/tvm_tune.py", *sys.argv[1:]])
    return (env + " " + cmd) if env else cmd


def fmt_ms(x):
    return "n/a" if x is None else (f"{x:.2f}" if x >= 1 else f"{x:.3g}")


def report(results, meta):
    now = datetime.datetime.fromtimestamp(meta["started"], datetime.timezone.utc)
    model = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    lines = ["Generated by `bench/tvm_tune.py`; do not edit by hand between the markers.", "",
             f"- Machine: {model}, {os.cpu_count()} cores; load average "
             f"{' '.join(meta['load_before'])} before, {' '.join(meta['load_after'])} after.",
             f"- Date: {now:%Y-%m-%d %H:%M} UTC; the run took {meta['seconds'] / 60:.1f} min.",
             f"- Command: `{command_line()}`",
             f"- tcomp: commit {meta['commit']}, binary `{meta['tcomp']}`"
             f"{built(meta['tcomp'])}."]
    if "tvm_na" in meta:
        lines += ["", f"**TVM could not be run here:** {meta['tvm_na']}"]
        return "\n".join(lines)
    info = meta["info"]
    b = meta["budget"]
    lines += [
        f"- TVM: apache-tvm {info['tvm']} (apache-tvm-ffi {info.get('tvm_ffi')}) from PyPI (LLVM {info['llvm']}, host CPU as its LLVM "
        f"detects it: `{info['host_cpu']}`), numpy {info['numpy']}, xgboost "
        f"{info.get('xgboost')}, Python `{info['python']}`; target "
        f"`{{\"kind\": \"llvm\", \"mcpu\": \"{meta['mcpu']}\", \"num-cores\": 1}}`"
        + ("" if meta["mcpu"] == "znver5" else " (this LLVM does not know znver5)")
        + ", `TVM_NUM_THREADS=1`. MetaSchedule `tune_tir` with its defaults (evolutionary "
        "search with the XGBoost cost model, local builder and runner with number 3, "
        "min_repeat_ms 100) except 32 trials per iteration instead of 64 (a batch's records reach "
        "the database only when the whole batch has run, about a minute for 64 here, so the batch "
        "under way at the deadline is lost), `max_trials_global` 100000: the tuning process is "
        f"killed after {b:.0f} s and the best record of its database is compiled.",
        f"- tcomp: `tcomp autotune bench/kernels.tc -e DEF --shape ... --option threads=1 "
        f"--population 20 --generations 100000 --seed 1 --cache FILE`, stopped with SIGINT after "
        f"{b:.0f} s (it finishes the candidate under way and keeps the best).",
        "- Both tuners compile on both cores and time each candidate on one thread.",
        f"- Measurement: {meta['rounds']} rounds, the order alternating, in the same run: tcomp "
        "`tcomp bench bench/kernels.tc -e DEF --shape ... --cache FILE --runs 10 --min-time 0.5 "
        "--json` (source `cache`, options with threads=1: `tcomp bench` reads the cache only when "
        "no option is given, so not `--option threads=1`); TVM `time_evaluator(number=1, repeat="
        "R)` with R runs of at least 10 and 0.5 s, after a warm-up run, in one server process. "
        "Each cell is the median over the rounds of the medians. tcomp/TVM speed: TVM ms / "
        "tcomp ms (above 1: tcomp is faster). Checks: TVM's output against NumPy (float64) on "
        "random inputs, and tcomp's tuned kernel (`tcomp run --cache FILE`) on the same inputs; "
        "max |diff| / max |ref|.",
        "",
        "| kernel | tcomp ms | tcomp GFLOP/s | TVM ms | TVM GFLOP/s | tcomp/TVM speed | "
        "tcomp tuning | TVM tuning | check (rel. error) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    notes = []
    for r in results:
        spec = KERNELS[r["kernel"]]
        tc = statistics.median(r["samples"]["tcomp"]) if r["samples"]["tcomp"] else None
        tv = statistics.median(r["samples"]["tvm"]) if r["samples"]["tvm"] else None
        t = r["tcomp_tune"]
        tt = r["tvm_tune"]
        tvm_h = r.get("tvm", {})
        summ = "; ".join(t.get("summary", []))
        tc_tune = f"{t['wall_s']:.0f} s: {summ}" if summ else f"{t['wall_s']:.0f} s"
        tv_tune = (f"{tt['wall_s']:.0f} s: {tvm_h.get('records', '?')} trials "
                   f"({tvm_h.get('valid_records', '?')} ran), best "
                   f"{fmt_ms(tvm_h.get('best_record_ms'))} ms in tuning"
                   + ("" if not tt["finished"] else ", finished before the budget"))
        check = (f"TVM {tvm_h['rel_err']:.0e}" if "rel_err" in tvm_h else "TVM n/a") + \
            (f", tcomp {r['tcomp_rel_err']:.0e}" if r.get("tcomp_rel_err") is not None
             else ", tcomp n/a")
        name = r["kernel"] + (" 1024" if r["kernel"] == "matmul" else " 8x64x56x56, 64 3x3")
        if r["problems"]:
            notes.append(f"{r['kernel']}: " + "; ".join(r["problems"]))
            name += f" [{len(notes)}]"
        busy = max(r.get("measure_cores", 0) - 1.0, 0)
        if busy > 0.25:
            notes.append(f"{r['kernel']}: the machine used {r['measure_cores']:.2f} cores on "
                         "average during the measurement (one is the measured kernel)")
            name += f" [{len(notes)}]"
        lines.append("| " + " | ".join([
            name, fmt_ms(tc), f"{spec['flops'] / tc / 1e6:.1f}" if tc else "–",
            fmt_ms(tv), f"{spec['flops'] / tv / 1e6:.1f}" if tv else "–",
            f"{tv / tc:.2f}x" if tc and tv else "–", tc_tune, tv_tune, check]) + " |")
    opts = [f"{r['kernel']}: `{r.get('tcomp_options')}`" for r in results if r.get("tcomp_options")]
    if opts:
        lines += ["", "tcomp's tuned options: " + "; ".join(opts) + "."]
    if notes:
        lines += [""] + [f"[{i + 1}] {n}" + ("  " if i + 1 < len(notes) else "")
                         for i, n in enumerate(notes)]
    return "\n".join(lines)


def built(path):
    """', built YYYY-MM-DD HH:MM UTC' from the binary's mtime (HEAD may differ)."""
    try:
        t = datetime.datetime.fromtimestamp(os.path.getmtime(path), datetime.timezone.utc)
        return f", built {t:%Y-%m-%d %H:%M} UTC"
    except OSError:
        return ""


def write_doc(text):
    """Put text between the markers, re-reading the file just before writing."""
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
