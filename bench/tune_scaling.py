#!/usr/bin/env python3
"""Distributed tuning: candidates evaluated per minute against the number of
ranks on this machine, the measured costs that bound it, and a projection
for a 100-kernel model on 16 and 64 nodes (README "Tuning at scale").

    python3 bench/tune_scaling.py [--tcomp build/tcomp] [--ranks 1,2,3,4]
                                  [--generations G] [--population P] [--rounds R]
                                  [--no-write]

1. One kernel (bench/kernels.tc matmul 256x256), the search spread over the
   ranks (`mpirun -n N tcomp autotune`; N = 1 is one process, no MPI):
   generations x population candidates, no final stage, no cache, every
   serving rank compiling one candidate at a time (`--jobs 1`; one process
   compiles as many at once as the machine has CPUs), R rounds with the rank
   counts alternating.  Throughput: candidates per minute of wall time.
2. A batch of four kernels (matmul 256, softmax 128x1000, layer norm
   256x1024, fcrelu 128x784x128; `--batch`), one process against N ranks.
3. The costs a projection needs, from the one-process run's progress lines:
   each candidate's compile time and timed wall time (the tuner's clock
   between candidates), the final stage's wall time from a run with it, and
   rank 0's work per job of a batch (adding a job's cache rows).

Oversubscribed ranks share this machine's cores: the figures show what the
protocol costs and how the ranks share the work, not what more machines
would give; the projection says that.  The table goes between
<!-- bench:tune-scaling:begin --> and <!-- bench:tune-scaling:end --> of
docs/performance.md (unless --no-write).  Standard library only.
"""

import argparse
import datetime
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNELS = os.path.join(ROOT, "bench", "kernels.tc")
MATMUL = ["-e", "matmul", "--shape", "A=256x256", "--shape", "B=256x256"]
BATCH = [
    "kernels.tc -e matmul --shape A=256x256 --shape B=256x256",
    "kernels.tc -e softmax --shape I=128x1000",
    "kernels.tc -e layernorm --shape X=256x1024 --shape G=1024 --shape Bt=1024",
    "kernels.tc -e fcrelu --shape In=128x784 --shape W=128x784 --shape Bias=128",
]
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")


def run(cmd, ranks):
    """Run tcomp cmd on ranks ranks; (wall seconds, stdout, stderr)."""
    full = (["mpirun", "--oversubscribe", "-n", str(ranks)] if ranks > 1 else []) + cmd
    t0 = time.monotonic()
    r = subprocess.run(full, capture_output=True, text=True, env=ENV)
    wall = time.monotonic() - t0
    if r.returncode:
        sys.exit(f"failed ({r.returncode}): {' '.join(full)}\n{r.stderr[-3000:]}")
    return wall, r.stdout, r.stderr


def seconds(text):
    """'1.23 ms' -> 0.00123."""
    m = re.match(r"([0-9.e+-]+) (s|ms|us)$", text.strip())
    if not m:
        return None
    return float(m.group(1)) * {"s": 1, "ms": 1e-3, "us": 1e-6}[m.group(2)]


def candidates(out):
    m = re.search(r"^# (\d+) candidates", out, re.M)
    return int(m.group(1)) if m else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tcomp", default=os.path.join(ROOT, "build", "tcomp"))
    ap.add_argument("--ranks", default="1,2,3,4")
    ap.add_argument("--generations", type=int, default=3)
    ap.add_argument("--population", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()
    if not shutil.which("mpirun"):
        sys.exit("mpirun not found (make setup installs Open MPI)")
    ranks = [int(x) for x in a.ranks.split(",")]
    tc = os.path.abspath(a.tcomp)
    common = ["--generations", str(a.generations), "--population", str(a.population),
              "--seed", "1", "--no-cache"]

    # 1. one kernel, its generations over the ranks
    single = {n: [] for n in ranks}
    count = {}
    for r in range(a.rounds):
        for n in (ranks if r % 2 == 0 else ranks[::-1]):
            cmd = [tc, "autotune", KERNELS] + MATMUL + common + ["--final-candidates", "0"]
            if n > 1:
                cmd += ["--jobs", "1"]
            wall, out, err = run(cmd, n)
            single[n].append(wall)
            count[n] = candidates(out)
            if n == 1 and r == 0:
                first_err = err
    # the one-process run's per-candidate costs: compile time, and the
    # wall between successive candidates' lines (their timing, one at a time)
    comp = [seconds(c) for c in re.findall(r"compile ([0-9.e+-]+ (?:s|ms|us))", first_err)]
    comp = [c for c in comp if c]

    # 2. a batch of four kernels: one process against the most ranks
    tmp = tempfile.mkdtemp(prefix="tcomp-scaling-")
    try:
        shutil.copy(KERNELS, tmp)
        bfile = os.path.join(tmp, "model.txt")
        with open(bfile, "w") as f:
            f.write("\n".join(BATCH) + "\n")
        batch = {1: [], max(ranks): []}
        for r in range(a.rounds):
            for n in ([1, max(ranks)] if r % 2 == 0 else [max(ranks), 1]):
                cache = os.path.join(tmp, f"b{n}-{r}.sqlite")
                cmd = [tc, "autotune", "--batch", bfile, "--generations", str(a.generations),
                       "--population", str(a.population), "--seed", "1", "--cache", cache,
                       "--final-candidates", "0"]
                wall, out, err = run(cmd, n)
                batch[n].append(wall)
        # 3. the final stage's cost, and rank 0's work per batch job (import of
        # one kernel's rows into a cache)
        cmd = [tc, "autotune", KERNELS] + MATMUL + common + ["--final-candidates", "3"]
        wall_final, out, _ = run(cmd, 1)
        wall_nofinal = statistics.median(single[1])
        cache = os.path.join(tmp, "one.sqlite")
        run([tc, "autotune", KERNELS] + MATMUL + ["--generations", str(a.generations),
             "--population", str(a.population), "--seed", "1", "--cache", cache,
             "--final-candidates", "0"], 1)
        rows = subprocess.run([tc, "cache", "export", "--cache", cache], capture_output=True,
                              text=True, check=True).stdout
        with open(os.path.join(tmp, "rows.jsonl"), "w") as f:
            f.write(rows)
        imports = []
        for i in range(5):
            t0 = time.monotonic()
            subprocess.run([tc, "cache", "import", os.path.join(tmp, "rows.jsonl"), "--cache",
                            os.path.join(tmp, f"imp{i}.sqlite")], check=True, capture_output=True)
            imports.append(time.monotonic() - t0)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    med1 = statistics.median(single[1])
    lines = []
    lines.append(f"Machine: {platform.machine()}, {os.cpu_count()} CPUs "
                 f"({cpu_name()}); {datetime.date.today()}; "
                 f"`python3 bench/tune_scaling.py --ranks {a.ranks} --generations "
                 f"{a.generations} --population {a.population} --rounds {a.rounds}`.")
    lines.append("")
    lines.append("| ranks | serving | one kernel: wall (median) | candidates | per minute | vs 1 |")
    lines.append("|---|---|---|---|---|---|")
    for n in ranks:
        m = statistics.median(single[n])
        lines.append(f"| {n} | {max(n - 1, 0) if n > 1 else '(one process)'} | {m:.1f} s "
                     f"({min(single[n]):.1f}-{max(single[n]):.1f}) | {count[n]} | "
                     f"{60 * count[n] / m:.0f} | {med1 / m:.2f}x |")
    lines.append("")
    b1, bn = statistics.median(batch[1]), statistics.median(batch[max(ranks)])
    lines.append(f"A batch of {len(BATCH)} kernels (`--batch`, {a.generations} x "
                 f"{a.population}, no final stage): one process {b1:.1f} s, "
                 f"{max(ranks)} ranks ({max(ranks) - 1} serving) {bn:.1f} s "
                 f"({b1 / bn:.2f}x).")
    lines.append("")
    per_cand = med1 / count[1]
    c = statistics.median(comp)
    lines.append(f"Costs (one process, matmul 256): compile per candidate median "
                 f"{c * 1e3:.0f} ms ({len(comp)} candidates); wall per candidate "
                 f"{per_cand:.2f} s, of which its timing (alone: no compile runs meanwhile) "
                 f"about {per_cand - c / os.cpu_count():.2f} s (the wall less the compile "
                 f"shared by {os.cpu_count()} CPUs); the final stage (3 + the defaults, 5 rounds) "
                 f"{wall_final - wall_nofinal:.1f} s; rank 0's work per batch job (adding "
                 f"{rows.count(chr(10))} cache rows) {statistics.median(imports) * 1e3:.0f} ms "
                 f"(a `tcomp cache import` process, start-up included).")
    text = "\n".join(lines)
    print(text)
    if not a.no_write:
        write_doc(text)


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


def write_doc(text):
    path = os.path.join(ROOT, "docs", "performance.md")
    doc = open(path).read()
    begin, end = "<!-- bench:tune-scaling:begin -->", "<!-- bench:tune-scaling:end -->"
    if begin not in doc:
        sys.exit(f"{path} has no {begin} marker")
    head, rest = doc.split(begin, 1)
    _, tail = rest.split(end, 1)
    with open(path, "w") as f:
        f.write(head + begin + "\n" + text + "\n" + end + tail)


if __name__ == "__main__":
    main()
