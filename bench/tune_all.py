#!/usr/bin/env python3
"""Tune every benchmark of bench/kernels.tc with `tcomp autotune` and measure
the tuned kernel against tcomp's defaults.

    python3 bench/tune_all.py [--quick] [--generations G] [--population P]
                              [--matmul-1024 GxP] [--threads 1[,2]] [--only NAME,...]
                              [--rounds R] [--seed N] [--tcomp PATH] [--no-cache-hit]
                              [--no-write] [--json-out FILE] [--keep]

The benchmarks and their shapes are bench/compare.py's (`baselines list`, the
table of bench/baselines.c).  For each benchmark and thread count:

  1. `tcomp autotune bench/kernels.tc -e DEF --shape ... --option threads=T
     --generations G --population P --seed N --cache FILE` into a private
     cache file of this run (one per benchmark and thread count, in a
     temporary folder; the user's kernel cache is never read nor written),
     timed by the wall clock;
  2. R round-robin rounds, the order alternating, of
       default: `tcomp bench ... --no-cache --option threads=T --json`
       tuned:   `tcomp bench ... --cache FILE --json`
     (the tuned one must report "source":"cache" and threads=T in its
     options: `tcomp bench` reads the cache only when no option is given on
     its command line, and the thread count is in the tuned options because
     it was fixed for the search).

The cell is the median over the rounds of `tcomp bench`'s median.  Also, once:
build/bench_cache_hit (tc_compile latency on a cache hit against a cold
compile).  The table goes between <!-- bench:tune:begin --> and
<!-- bench:tune:end --> of docs/performance.md (unless --no-write); nothing
else of the file is touched.  Standard library only.  See bench/README.md.
"""

import argparse
import datetime
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True   # no bench/__pycache__ in the work tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare as C  # noqa: E402  (bench/compare.py: baselines list, run, env, /proc load)

BEGIN, END = "<!-- bench:tune:begin -->", "<!-- bench:tune:end -->"
SECTION = "## Autotuner: tuned against defaults"
log = C.log


def parse_budget(text):
    m = re.fullmatch(r"\s*(\d+)\s*[xX*]\s*(\d+)\s*", text or "")
    if not m or int(m.group(1)) < 1 or int(m.group(2)) < 2:
        raise SystemExit(f"tune_all.py: budget {text!r}: expected GxP like 5x20 (P >= 2)")
    return int(m.group(1)), int(m.group(2))


def shape_args(bench):
    out = []
    for t in bench["inputs"]:
        out += ["--shape", t["name"] + "=" + "x".join(map(str, t["shape"]))]
    return out


def parse_opts(text):
    """'a=1;b=2' -> {'a': '1', 'b': '2'} (tcomp bench's one-line options)."""
    d = {}
    for item in (text or "").replace("\n", ";").split(";"):
        item = item.strip()
        if "=" in item and not item.startswith("#"):
            k, v = item.split("=", 1)
            d[k.strip()] = v.strip()
    return d


class Tuner:
    def __init__(self, exe, runs, min_time, seed, timeout):
        self.exe, self.runs, self.min_time, self.seed = exe, runs, min_time, seed
        self.kernels = os.path.join(C.BENCH, "kernels.tc")
        self.timeout = timeout

    def autotune(self, bench, threads, gens, pop, cache, logfile):
        cmd = [self.exe, "autotune", self.kernels, "-e", bench["entry"], *shape_args(bench),
               "--option", f"threads={threads}", "--generations", str(gens),
               "--population", str(pop), "--seed", str(self.seed), "--cache", cache]
        t0 = time.monotonic()
        rc, out, err = C.run(cmd, env=C.env_for(threads), timeout=self.timeout)
        wall = time.monotonic() - t0
        with open(logfile, "w") as f:
            f.write("$ " + " ".join(shlex.quote(x) for x in cmd) + "\n" + err + "\n" + out)
        res = {"cmd": cmd, "rc": rc, "wall_s": wall, "stdout": out}
        if rc != 0:
            res["error"] = f"tcomp autotune exit {rc}: {C.first_line(err or out)}"
            return res
        m = re.search(r"^# best (.*?), defaults (.*?)(?::|$)", out, re.M)
        if m:
            res["tuner_best"], res["tuner_default"] = m.group(1), m.group(2)
        m = re.search(r"^# (\d+) candidates \((\d+) failed, (\d+) cut short\) in (\d+) "
                      r"generations, (.*)$", out, re.M)
        if m:
            res.update(measured=int(m.group(1)), failed=int(m.group(2)), cut=int(m.group(3)),
                       generations=int(m.group(4)), tuner_elapsed=m.group(5))
        res["best"] = parse_opts(";".join(l for l in out.splitlines()
                                          if l.strip() and not l.startswith("#")))
        return res

    def bench(self, bench, threads, cache):
        cmd = [self.exe, "bench", self.kernels, "-e", bench["entry"], *shape_args(bench),
               "--runs", str(self.runs), "--min-time", str(self.min_time), "--json"]
        cmd += ["--cache", cache] if cache else ["--no-cache", "--option", f"threads={threads}"]
        rc, out, err = C.run(cmd, env=C.env_for(threads))
        res = C.json_line(out)
        if rc == 0 and res and "median_ms" in res:
            return res
        return C.NA(f"tcomp bench exit {rc}: {C.first_line(err or out)}")


def cache_hit(exe_dir):
    """build/bench_cache_hit's output at matmul 256 (its default) and 1024."""
    exe = os.path.join(exe_dir, "bench_cache_hit")
    if not os.access(exe, os.X_OK):
        return None, f"no {exe} (cmake --build BUILD --target bench_cache_hit)"
    texts = []
    for args in (["20"], ["20", "1024", "1024", "1024"]):
        rc, out, err = C.run([exe, *args], env=C.env_for(1), timeout=900)
        if rc != 0:
            return None, f"bench_cache_hit {' '.join(args)} exit {rc}: {C.first_line(err or out)}"
        texts.append((f"{exe} {' '.join(args)}", out.strip()))
    return texts, None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="budget 2x8, matmul 1024 too, 2 rounds, the --quick benchmarks of "
                    "compare.py, no bench_cache_hit")
    ap.add_argument("--generations", type=int, help="generations of every search (default 5, "
                    "quick 2)")
    ap.add_argument("--population", type=int, help="candidates per generation (default 20, "
                    "quick 8)")
    ap.add_argument("--matmul-1024", metavar="GxP",
                    help="budget of sgemm_1024 at 1 thread (default: the same as the others); "
                    "the issue's target is 5x20")
    ap.add_argument("--threads", default="1", help="thread counts, e.g. 1,2 (default 1)")
    ap.add_argument("--only", help="a subset, as compare.py --only")
    ap.add_argument("--rounds", type=int, help="round-robin rounds (default 3, quick 2)")
    ap.add_argument("--runs", type=int, default=5, help="tcomp bench --runs (default 5)")
    ap.add_argument("--min-time", type=float, default=0.2,
                    help="tcomp bench --min-time (default 0.2)")
    ap.add_argument("--seed", type=int, default=1, help="tcomp autotune --seed (default 1)")
    ap.add_argument("--tune-timeout", type=float, default=3600,
                    help="wall-time limit of one tcomp autotune, seconds (default 3600)")
    ap.add_argument("--tcomp", default=os.environ.get("TCOMP", os.path.join(C.REPO, "build", "tcomp")),
                    help="the tcomp binary (default $TCOMP, else build/tcomp); "
                    "bench_cache_hit is taken from the same folder")
    ap.add_argument("--no-cache-hit", action="store_true", help="do not run bench_cache_hit")
    ap.add_argument("--no-write", action="store_true", help="print only, leave docs alone")
    ap.add_argument("--json-out", help="also write every measurement to this JSON file")
    ap.add_argument("--keep", action="store_true",
                    help="keep the work folder (cache files, tuner logs)")
    a = ap.parse_args()

    gens = a.generations or (2 if a.quick else 5)
    pop = a.population or (8 if a.quick else 20)
    mm = parse_budget(a.matmul_1024) if a.matmul_1024 else (gens, pop)
    rounds = a.rounds or (2 if a.quick else 3)
    try:
        thread_counts = [int(t) for t in a.threads.split(",") if t]
        assert thread_counts and all(t >= 1 for t in thread_counts)
    except (ValueError, AssertionError):
        raise SystemExit(f"tune_all.py: --threads {a.threads}: expected numbers like 1,2")
    exe = os.path.abspath(a.tcomp)
    if not os.access(exe, os.X_OK):
        raise SystemExit(f"tune_all.py: no tcomp binary at {exe} (build it, or pass --tcomp)")
    started = time.time()
    load_before = open("/proc/loadavg").read().split()[:3]
    commit = C.git("rev-parse", "--short", "HEAD") or "?"
    workdir = tempfile.mkdtemp(prefix="tcomp-tune-all-")
    tuner = Tuner(exe, a.runs, a.min_time, a.seed, a.tune_timeout)
    results = []
    try:
        bl = C.Baselines(workdir)
        benches = C.select(bl.list(), a.only, a.quick)
        for bi, b in enumerate(benches):
            for threads in thread_counts:
                g, p = mm if (b["name"] == "sgemm_1024" and threads == 1) else (gens, pop)
                tag = f"[{bi + 1}/{len(benches)}] {b['name']} threads={threads}"
                cache = os.path.join(workdir, f"{b['name']}-t{threads}.sqlite")
                cpu0 = C.cpu_sample()
                log(f"{tag}: tcomp autotune {g}x{p} ...")
                tr = tuner.autotune(b, threads, g, p, cache,
                                    os.path.join(workdir, f"{b['name']}-t{threads}.log"))
                cpu1 = C.cpu_sample()
                row = {"bench": b["name"], "entry": b["entry"], "threads": threads,
                       "budget": f"{g}x{p}", "tune": {k: v for k, v in tr.items()
                                                      if k not in ("stdout",)},
                       "tune_others": C.others_cores(cpu0, cpu1), "samples": {"default": [],
                       "tuned": []}, "problems": []}
                if "error" in tr:
                    row["problems"].append(tr["error"])
                    log(f"{tag}: {tr['error']}")
                    results.append(row)
                    continue
                log(f"{tag}: tuned in {tr['wall_s']:.1f} s; tuner says best {tr.get('tuner_best')}"
                    f", defaults {tr.get('tuner_default')}")
                for r in range(rounds):
                    order = ["default", "tuned"] if r % 2 == 0 else ["tuned", "default"]
                    for which in order:
                        m = tuner.bench(b, threads, cache if which == "tuned" else None)
                        if isinstance(m, C.NA):
                            row["problems"].append(f"{which}: {m.reason}")
                            continue
                        row["samples"][which].append(m["median_ms"])
                        row.setdefault("options", {})[which] = m.get("options")
                        row.setdefault("source", {})[which] = m.get("source")
                        row.setdefault("compile_ms", {}).setdefault(which, []).append(
                            m.get("compile_ms"))
                    log(f"{tag}: round {r + 1}/{rounds}: " + ", ".join(
                        f"{w} {C.fmt_ms(row['samples'][w][-1])} ms" if row["samples"][w]
                        else f"{w} n/a" for w in ("default", "tuned")))
                row["measure_others"] = C.others_cores(cpu1, C.cpu_sample())
                src = row.get("source", {}).get("tuned")
                topt = parse_opts(row.get("options", {}).get("tuned"))
                if src is not None and src != "cache":
                    row["problems"].append(f"the tuned run's source was {src!r}, not 'cache'")
                if topt and topt.get("threads") != str(threads):
                    row["problems"].append(f"the tuned kernel ran with threads="
                                           f"{topt.get('threads')}, not {threads}")
                for p_ in row["problems"]:
                    log(f"WARNING: {b['name']} threads={threads}: {p_}")
                results.append(row)
        hit, hit_err = (None, "left out (--no-cache-hit)") if (a.no_cache_hit or a.quick) \
            else cache_hit(os.path.dirname(exe))
    finally:
        if not a.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            log(f"tune_all.py: work folder kept: {workdir}")

    meta = {"started": started, "seconds": time.time() - started, "load_before": load_before,
            "load_after": open("/proc/loadavg").read().split()[:3], "commit": commit,
            "tcomp": exe, "rounds": rounds, "runs": a.runs, "min_time": a.min_time,
            "seed": a.seed, "budget": (gens, pop), "mm": mm, "hit": hit, "hit_err": hit_err}
    text = report(results, meta)
    print(text)
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump({"results": results, "meta": {k: v for k, v in meta.items()}}, f, indent=1)
    if not a.no_write:
        write_doc(text)
        log(f"tune_all.py: table written to {os.path.relpath(C.DOC, os.getcwd())}")
    return 0


def report(results, meta):
    def med(v):
        return statistics.median(v) if v else None

    head = ["benchmark", "threads", "budget", "tuning wall", "candidates (failed, cut)",
            "default ms", "tuned ms", "speedup", "best options (where they differ from the "
            "defaults)"]
    rows, notes = [], []
    for r in results:
        t = r["tune"]
        d, u = med(r["samples"]["default"]), med(r["samples"]["tuned"])
        dopt = parse_opts((r.get("options") or {}).get("default"))
        best = t.get("best") or {}
        diff = [f"{k}={v}" for k, v in best.items()
                if k not in ("target",) and dopt.get(k) != v] if dopt else \
            [f"{k}={v}" for k, v in best.items()]
        cand = (f"{t['measured']} ({t['failed']}, {t['cut']})" if "measured" in t else "?")
        busy = max(r.get("tune_others", 0), r.get("measure_others", 0))
        thr = str(r["threads"])
        if busy > C.BUSY:
            notes.append(f"{r['bench']} threads={r['threads']}: other processes used "
                         f"{r.get('tune_others', 0):.2f} cores during the tuning and "
                         f"{r.get('measure_others', 0):.2f} during the measurement")
            thr += f" (busy [{len(notes)}])"
        if r["problems"]:
            notes.append(f"{r['bench']} threads={r['threads']}: " + "; ".join(r["problems"]))
            thr += f" (problem [{len(notes)}])"
        rows.append([r["bench"], thr, r["budget"], f"{t['wall_s']:.0f} s" if "wall_s" in t else "?",
                     cand, C.fmt_ms(d) if d else "n/a", C.fmt_ms(u) if u else "n/a",
                     f"{d / u:.2f}x" if d and u else "–",
                     "`" + " ".join(diff) + "`" if diff else "(the defaults)"])
    now = datetime.datetime.fromtimestamp(meta["started"], datetime.timezone.utc)
    g, p = meta["budget"]
    mg, mp = meta["mm"]
    cmd = " ".join(shlex.quote(x) for x in ["python3", "bench/tune_all.py", *sys.argv[1:]])
    lines = [
        "Generated by `bench/tune_all.py`; do not edit by hand between the markers.",
        "",
        f"- Machine: {C.machine()}; load average {' '.join(meta['load_before'])} before, "
        f"{' '.join(meta['load_after'])} after.",
        f"- Date: {now:%Y-%m-%d %H:%M} UTC; the run took {meta['seconds'] / 60:.1f} min.",
        f"- Command: `{cmd}`",
        f"- tcomp: commit {meta['commit']}, binary `{meta['tcomp']}`"
             f"{built(meta['tcomp'])}.",
        f"- Tuning: `tcomp autotune bench/kernels.tc -e DEF --shape ... --option threads=T "
        f"--generations {g} --population {p} --seed {meta['seed']} --cache FILE`"
        + (f" ({mg} x {mp} for sgemm_1024 at 1 thread)" if (mg, mp) != (g, p) else "")
        + ", one fresh cache file per row (no seeds from other rows or from the user's cache); "
        "the tuner compiles candidates on both cores and times each alone. \"tuning wall\" is "
        "the wall time of the whole `tcomp autotune` command (the defaults are its first "
        "candidate).",
        f"- Measurement: {meta['rounds']} rounds, the order alternating: default `tcomp bench "
        f"... --no-cache --option threads=T --runs {meta['runs']} --min-time {meta['min_time']} "
        "--json`, tuned `tcomp bench ... --cache FILE --runs ... --json` (its `source` checked "
        "to be `cache`, and its threads option T); each cell is the median over the rounds of "
        "`tcomp bench`'s median. Speedup: default ms / tuned ms. The tuner checked every "
        "candidate's output against the defaults' on the same inputs.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "|".join("---" for _ in head) + "|",
    ]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    if notes:
        lines.append("")
        lines += [f"[{i + 1}] {n}" + ("  " if i + 1 < len(notes) else "")
                  for i, n in enumerate(notes)]
    mmrow = [r for r in results if r["bench"] == "sgemm_1024" and r["threads"] == 1
             and "wall_s" in r["tune"]]
    if mmrow:
        t = mmrow[0]["tune"]
        lines += ["", f"Matmul 1024 ({mmrow[0]['budget'].replace('x', ' generations x ')} "
                  f"candidates, one thread): `tcomp autotune` took {t['wall_s']:.0f} s wall "
                  f"({t.get('measured', '?')} candidates measured, {t.get('failed', '?')} failed, "
                  f"{t.get('cut', '?')} cut short)."]
    lines += ["", "Cache-hit latency (`tc_compile` with NULL options, parse and checks "
              "included; \"cold compile\" is without a cache, so with the default options; the "
              "cache holds `tile=64,64 regtile=6,2` for the hits):"]
    if meta["hit"]:
        for c, out in meta["hit"]:
            lines += ["", f"`{c}`:", "", "```", out, "```"]
    else:
        lines += ["", f"not measured: {meta['hit_err']}."]
    return "\n".join(lines)


def built(path):
    """', built YYYY-MM-DD HH:MM UTC' from the binary's mtime (HEAD may differ)."""
    try:
        t = datetime.datetime.fromtimestamp(os.path.getmtime(path), datetime.timezone.utc)
        return f", built {t:%Y-%m-%d %H:%M} UTC"
    except OSError:
        return ""


def write_doc(text):
    """Put text between the markers, re-reading the file just before writing
    (others may be editing other sections)."""
    with open(C.DOC) as f:
        doc = f.read()
    if BEGIN not in doc or END not in doc:
        doc = doc.rstrip("\n") + f"\n\n{SECTION}\n\n{BEGIN}\n{END}\n"
    start = doc.index(BEGIN) + len(BEGIN)
    end = doc.index(END, start)
    doc = doc[:start] + "\n" + text + "\n" + doc[end:]
    with open(C.DOC, "w") as f:
        f.write(doc)


if __name__ == "__main__":
    sys.exit(main())
