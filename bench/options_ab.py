#!/usr/bin/env python3
"""Option sets of tcomp timed against each other, alternating in one run.

    python3 bench/options_ab.py --only NAME[,NAME] [--rounds R] [--threads 1,2]
                                [--tcomp PATH] SET [SET ...]

    SET:  LABEL[@TCOMP]=OPTIONS    OPTIONS: space-separated NAME=VALUE (may be empty)

The question "which option carries the gap between the defaults and the
tuned options" is answered by timing the defaults, the tuned options and
each option alone in one run, on one loaded machine: this script runs each
selected benchmark of bench/compare.py's table (`baselines list`: the shapes
of bench/baselines.c) with `tcomp bench --json --no-cache --option ...` of
every set, the sets alternating (the order reversed every round), R rounds
(default 5), at each thread count.  A set may name its own tcomp binary
(`old@/tmp/old/tcomp=`: an older build's defaults), else --tcomp (default
$TCOMP, else build/tcomp).  For every benchmark it prints each set's median
over the rounds of `tcomp bench`'s median, its minimum, the ratio of the
median to the first set's and the set's spread (slowest round over
fastest).  Nothing is written; paste the output into docs/performance.md.

    python3 bench/options_ab.py --only sgd --threads 1 "defaults=" \\
        "tuned=parallel=on tile=8,8 pack=off" "vector16=vector=16"
"""

import argparse
import os
import statistics
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import Baselines, Tcomp, select, log  # noqa: E402


class OptionSet(Tcomp):
    """A tcomp binary with --option NAME=VALUE flags after --no-cache."""

    def __init__(self, label, exe, options, quick):
        super().__init__(exe, None, quick)
        self.label, self.flags = label, options

    def _opts(self):
        return ["--no-cache"] + [x for o in self.flags for x in ("--option", o)]


def parse_set(text, default_exe):
    """(label, exe, [NAME=VALUE, ...]) from LABEL[@TCOMP]=OPTIONS."""
    head, sep, opts = text.partition("=")
    if not sep or not head:
        raise SystemExit(f"options_ab.py: {text!r}: expected LABEL[@TCOMP]=OPTIONS")
    label, _, exe = head.partition("@")
    flags = opts.split()
    for f in flags:
        if "=" not in f:
            raise SystemExit(f"options_ab.py: {text!r}: option {f!r} is not NAME=VALUE")
    return label, os.path.abspath(exe or default_exe), flags


def spread(v):
    return max(v) / min(v) if v and min(v) > 0 else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sets", nargs="+", metavar="SET")
    ap.add_argument("--only", required=True, help="benchmarks, as compare.py --only")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", default="1")
    ap.add_argument("--tcomp", default=os.environ.get("TCOMP") or os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build", "tcomp"))
    a = ap.parse_args()
    threads = [int(t) for t in a.threads.split(",") if t]
    sets = [OptionSet(*parse_set(s, a.tcomp), False) for s in a.sets]
    for s in sets:
        if s.broken:
            raise SystemExit(f"options_ab.py: {s.label}: {s.broken}")
    load0 = open("/proc/loadavg").read().split()[:3]
    work = tempfile.mkdtemp(prefix="tcomp-optab-")
    try:
        benches = select(Baselines(work).list(), a.only, False)
        out = []
        for b in benches:
            for th in threads:
                got = {s.label: [] for s in sets}
                for r in range(a.rounds):
                    for s in (sets if r % 2 == 0 else sets[::-1]):
                        m = s.measure(b, th)
                        if not isinstance(m, dict):
                            raise SystemExit(f"options_ab.py: {s.label} {b['name']}: {m.reason}")
                        got[s.label].append(m["median_ms"])
                base = statistics.median(got[sets[0].label])
                for s in sets:
                    v = got[s.label]
                    med = statistics.median(v)
                    out.append((b["name"], th, s.label, med, min(v), med / base, spread(v),
                                " ".join(s.flags) or "(defaults)", s.exe))
                    log(f"{b['name']} threads={th} {s.label}: {med:.4g} ms, "
                        f"{med / base:.3f} of {sets[0].label}")
        load1 = open("/proc/loadavg").read().split()[:3]
        print(f"{a.rounds} rounds, the sets alternating; load average {' '.join(load0)} "
              f"before, {' '.join(load1)} after\n")
        print("| benchmark | threads | set | median ms | min ms | / first | spread | options | tcomp |")
        print("|---|---|---|---|---|---|---|---|---|")
        for name, th, label, med, mn, ratio, sp, opts, exe in out:
            print(f"| {name} | {th} | {label} | {med:.4g} | {mn:.4g} | {ratio:.3f} | {sp:.3f} "
                  f"| `{opts}` | {exe} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
