#!/bin/sh
# Distributed tuning over MPI: `mpirun -n 3 tcomp autotune` against one
# process (README "Tuning at scale").
#
#   sh tests/test_tune_mpi.sh TCOMP MPIRUN
#
# With fake times (TCOMP_TUNE_TEST_FITNESS: every candidate is compiled, run
# and checked, but reports a time made from its options) three ranks print
# the same result as one process with the same seed, the serving ranks
# measure candidates, and a rank that kills itself mid-run (with mpirun
# --enable-recovery) is given up while the run finishes with the same
# result; with real times every candidate lands in the one kernel cache; a
# batch file's kernels go whole to the ranks, with the same choices as one
# process and every run in rank 0's cache.
set -eu
TCOMP=$1
MPIRUN=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
# Open MPI refuses to run as root without these; its own allocations are
# not ours to leak-check (the ASan build: the library's side of distributed
# tuning is leak-checked by test_tune_dist)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
# each run within 150 s: a hang fails the step it is in, not the whole test
mpirun() { timeout 150 "$MPIRUN" --oversubscribe "$@"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

cat > mm.tc <<'TC'
def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,r_k) * B(r_k,n) }
TC
args="mm.tc --shape A=48x48 --shape B=48x48 --generations 3 --population 6 --seed 11
      --runs 2 --min-time 0.001 --final-candidates 2 --final-rounds 2 --final-time 0.001
      --final-warmup 0.001 --compile-timeout 3 --timeout 2 --no-cache --jobs 1"
# the result without the run's duration
result() { sed 's/ in \([0-9]*\) generations, .*/ in \1 generations/' "$1"; }

TCOMP_TUNE_TEST_FITNESS=1 "$TCOMP" autotune $args > one.out 2> one.err ||
  fail "one process: $(cat one.err)"
TCOMP_TUNE_TEST_FITNESS=1 mpirun -n 3 "$TCOMP" autotune $args > three.out 2> three.err ||
  fail "three ranks: $(cat three.err)"
result one.out > a
result three.out > b
diff a b > /dev/null || fail "three ranks chose otherwise: $(diff a b)"
grep -q "^# final stage" three.out || fail "no final stage: $(cat three.out)"
counts=$(sed -n 's/^tcomp: candidates measured by rank: \([0-9 ]*\) .*/\1/p' three.err)
set -- $counts
[ $# -eq 3 ] || fail "no per-rank counts: $(cat three.err)"
[ "$1" -eq 1 ] && [ "$2" -gt 0 ] && [ "$3" -gt 0 ] || fail "ranks measured $counts"
total=$(sed -n 's/^# \([0-9]*\) candidates.*/\1/p' three.out)
[ $(($1 + $2 + $3)) -eq "$total" ] || fail "ranks measured $counts of $total"

# rank 1 dies on its second batch: given up, the others measure its candidates
TCOMP_TUNE_TEST_FITNESS=1 TCOMP_TUNE_TEST_RANK_FAULT=1:1:kill \
  mpirun --enable-recovery -n 3 "$TCOMP" autotune $args > kill.out 2> kill.err ||
  fail "a rank killed: $(cat kill.err)"
result kill.out > c
diff a c > /dev/null || fail "with a rank killed the result differs: $(diff a c)"
grep -q "rank 1 (.*given up" kill.err || fail "no word of the rank given up: $(cat kill.err)"
grep -q "1 of the 2 ranks was given up" kill.err || fail "$(cat kill.err)"

# real times, one cache: every candidate and re-timing of the run recorded
mpirun -n 3 "$TCOMP" autotune $(echo "$args" | sed 's/--no-cache/--cache tc.sqlite/') \
  > real.out 2> real.err || fail "real times: $(cat real.err)"
n=$(sed -n 's/^# \([0-9]*\) candidates.*/\1/p' real.out)
f=$(sed -n 's/^# final stage: \([0-9]*\) configurations.*/\1/p' real.out)
rows=$("$TCOMP" cache export --cache tc.sqlite | wc -l)
[ "$rows" -eq $((n + ${f:-0})) ] || fail "the cache has $rows runs for $n candidates and ${f:-0} re-timings"
# a batch: one kernel per rank at a time, each tuned whole on its rank,
# their rows in rank 0's cache; with fake times the same choices as one
# process, and the batch's errors name their line
# (kernels of other defs: a kernel tuned before another of the same def
# would seed it from the cache in one process, not when they run at once)
cat > rows.tc <<'TC'
def rowsum(float(M,N) X) -> (S) { S(m) +=! X(m,r_n) }
TC
cat > kernels.txt <<'TXT'
# two kernels
mm.tc --shape A=32x32 --shape B=32x32
rows.tc -e rowsum --shape X=64x48   # another def
TXT
bargs="--batch kernels.txt --generations 2 --population 4 --seed 5 --runs 2 --min-time 0.001
       --final-candidates 1 --final-rounds 2 --final-time 0.001 --final-warmup 0.001
       --compile-timeout 3 --timeout 2 --jobs 1"
TCOMP_TUNE_TEST_FITNESS=1 "$TCOMP" autotune $bargs --cache b1.sqlite > b1.out 2> b1.err ||
  fail "a batch in one process: $(cat b1.err)"
TCOMP_TUNE_TEST_FITNESS=1 mpirun -n 3 "$TCOMP" autotune $bargs --cache b3.sqlite > b3.out 2> b3.err ||
  fail "a batch on three ranks: $(cat b3.err)"
grep "^# the choice\|^# kernel" b1.out > a
grep "^# the choice\|^# kernel" b3.out > b
[ "$(grep -c '^# the choice' b)" -eq 2 ] || fail "a batch on three ranks: $(cat b3.out)"
diff a b > /dev/null || fail "the batch on three ranks chose otherwise: $(diff a b)"
grep -q "on rank 1" b3.out && grep -q "on rank 2" b3.out || fail "the ranks did not share the batch: $(cat b3.out)"
r1=$("$TCOMP" cache export --cache b1.sqlite | wc -l)
r3=$("$TCOMP" cache export --cache b3.sqlite | wc -l)
[ "$r1" -gt 0 ] && [ "$r1" -eq "$r3" ] || fail "the batch's caches hold $r1 and $r3 runs"
printf 'mm.tc --shape A=4x4 --shape B=4x4\nmm.tc --shape A=4x4 --bogus\n' > bad.txt
if "$TCOMP" autotune --batch bad.txt > bad.out 2> bad.err; then fail "a bad batch line was taken"; fi
grep -q "bad.txt:2: " bad.err || fail "the bad batch line is not named: $(cat bad.err)"

echo "ok: 3 ranks chose as one process ($counts of $total measured by rank), survived a killed rank, filled one cache ($rows runs), and tuned a batch a kernel per rank ($r3 runs)"
