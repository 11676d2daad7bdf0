#!/usr/bin/env python3
"""Two builds of tcomp timed against each other, alternating in one run.

    python3 bench/ab.py OLD_TCOMP NEW_TCOMP [--rounds R] [--threads 1,2] [--only NAME,...]
                        [--compile OLD_BENCH_COMPILE NEW_BENCH_COMPILE] [--quick]

A refactoring must not slow tcomp down beyond the run-to-run spread.  This
script runs every benchmark of bench/compare.py's table (`baselines list`:
the shapes of bench/baselines.c) with `tcomp bench --json --no-cache` of
both binaries, old and new alternating (the order swapped every round), R
rounds each (default 5), at each thread count.  For every benchmark it
prints each side's median over the rounds, new / old, and the spread of
each side (its slowest round over its fastest): a ratio further from 1 than
the larger spread is flagged SLOWER or FASTER.  With --compile, the two
bench_compile programs (compile latency through the API) alternate as
well.  Nothing is written; paste the output into docs/performance.md.
Run it on an otherwise idle machine (the load average is printed before
and after).
"""

import argparse
import os
import re
import statistics
import sys
import tempfile
import shutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import Baselines, Tcomp, run, select, log  # noqa: E402


def spread(v):
    return max(v) / min(v) if v and min(v) > 0 else float("nan")


def verdict(ratio, s):
    if ratio > s:
        return "SLOWER"
    if ratio < 1 / s:
        return "FASTER"
    return "same"


COMPILE_LINE = re.compile(r"^(\w+)\s+median\s+([\d.]+) ms")


def compile_ms(exe, repeats):
    """{kernel: median ms} from one bench_compile run."""
    rc, out, err = run([exe, str(repeats)], timeout=1800)
    if rc != 0:
        raise SystemExit(f"ab.py: {exe} failed: {err.strip()[:200]}")
    return {m.group(1): float(m.group(2)) for m in map(COMPILE_LINE.match, out.splitlines()) if m}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--only")
    ap.add_argument("--quick", action="store_true", help="the quick benchmarks of compare.py")
    ap.add_argument("--compile", nargs=2, metavar=("OLD", "NEW"),
                    help="bench_compile of each build, alternated too")
    a = ap.parse_args()
    threads = [int(t) for t in a.threads.split(",") if t]
    load0 = open("/proc/loadavg").read().split()[:3]
    work = tempfile.mkdtemp(prefix="tcomp-ab-")
    try:
        bl = Baselines(work)
        benches = select(bl.list(), a.only, a.quick)
        sides = {"old": Tcomp(os.path.abspath(a.old), None, False),
                 "new": Tcomp(os.path.abspath(a.new), None, False)}
        for k, t in sides.items():
            if t.broken:
                raise SystemExit(f"ab.py: {k}: {t.broken}")
        rows = []
        for b in benches:
            for th in threads:
                got = {"old": [], "new": []}
                for r in range(a.rounds):
                    for k in (("old", "new") if r % 2 == 0 else ("new", "old")):
                        m = sides[k].measure(b, th)
                        if not isinstance(m, dict):
                            raise SystemExit(f"ab.py: {k} {b['name']}: {m.reason}")
                        got[k].append(m["median_ms"])
                o, n = statistics.median(got["old"]), statistics.median(got["new"])
                s = max(spread(got["old"]), spread(got["new"]))
                rows.append((b["name"], th, o, n, n / o, spread(got["old"]), spread(got["new"]),
                             verdict(n / o, s)))
                log(f"{b['name']} threads={th}: old {o:.4g} ms, new {n:.4g} ms, "
                    f"new/old {n / o:.3f} ({rows[-1][-1]})")
        comp = []
        if a.compile:
            got = {"old": [], "new": []}
            for r in range(a.rounds):
                for k, exe in ((("old", a.compile[0]), ("new", a.compile[1])) if r % 2 == 0
                               else (("new", a.compile[1]), ("old", a.compile[0]))):
                    got[k].append(compile_ms(exe, 5))
            # the cases both programs have (bench_compile gains cases over time)
            for kern in [c for c in got["old"][0] if all(c in d for d in got["old"] + got["new"])]:
                ov = [d[kern] for d in got["old"]]
                nv = [d[kern] for d in got["new"]]
                o, n = statistics.median(ov), statistics.median(nv)
                s = max(spread(ov), spread(nv))
                comp.append((kern, o, n, n / o, spread(ov), spread(nv), verdict(n / o, s)))
        load1 = open("/proc/loadavg").read().split()[:3]
        print(f"old: {os.path.abspath(a.old)}\nnew: {os.path.abspath(a.new)}\n"
              f"{a.rounds} rounds, old and new alternating; load average "
              f"{' '.join(load0)} before, {' '.join(load1)} after\n")
        print("| benchmark | threads | old ms | new ms | new/old | old spread | new spread | |")
        print("|---|---|---|---|---|---|---|---|")
        for name, th, o, n, ratio, so, sn, v in rows:
            print(f"| {name} | {th} | {o:.4g} | {n:.4g} | {ratio:.3f} | {so:.3f} | {sn:.3f} | {v} |")
        if comp:
            print("\n| compile latency | old ms | new ms | new/old | old spread | new spread | |")
            print("|---|---|---|---|---|---|---|")
            for kern, o, n, ratio, so, sn, v in comp:
                print(f"| {kern} | {o:.4g} | {n:.4g} | {ratio:.3f} | {so:.3f} | {sn:.3f} | {v} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
