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
# process and every run in rank 0's cache; so do a training step's kernels
# (--train).  A Ctrl-C of mpirun keeps every run measured in the cache, a
# SIGINT to rank 0 stops a batch and a single def gracefully, and the job
# folders of killed ranks are removed.
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
# jobs_as_one NAME WHAT N ARGS...: with fake times, the N kernels of ARGS
# tuned by one process (NAME1.sqlite, .out, .err) and on three ranks
# (NAME3.*) get the same choices, and ranks 1 and 2 each tune some
jobs_as_one() {
  name=$1 what=$2 n=$3
  shift 3
  TCOMP_TUNE_TEST_FITNESS=1 "$TCOMP" autotune "$@" --cache ${name}1.sqlite > ${name}1.out \
    2> ${name}1.err || fail "$what in one process: $(cat ${name}1.err)"
  TCOMP_TUNE_TEST_FITNESS=1 mpirun -n 3 "$TCOMP" autotune "$@" --cache ${name}3.sqlite \
    > ${name}3.out 2> ${name}3.err || fail "$what on three ranks: $(cat ${name}3.err)"
  grep "^# the choice\|^# kernel" ${name}1.out > a
  grep "^# the choice\|^# kernel" ${name}3.out > b
  [ "$(grep -c '^# the choice' b)" -eq $n ] || fail "$what on three ranks: $(cat ${name}3.out)"
  diff a b > /dev/null || fail "$what on three ranks chose otherwise: $(diff a b)"
  grep -q "on rank 1" ${name}3.out && grep -q "on rank 2" ${name}3.out ||
    fail "the ranks did not share $what: $(cat ${name}3.out)"
  grep -q "^tcomp: kernels tuned by rank: 0 [1-9]* [1-9]" ${name}3.err ||
    fail "no per-rank counts: $(cat ${name}3.err)"
}
jobs_as_one b "a batch" 2 $bargs
r1=$("$TCOMP" cache export --cache b1.sqlite | wc -l)
r3=$("$TCOMP" cache export --cache b3.sqlite | wc -l)
[ "$r1" -gt 0 ] && [ "$r1" -eq "$r3" ] || fail "the batch's caches hold $r1 and $r3 runs"
# a training step (--train): its five kernels go whole to the ranks as a
# batch, with the same choices as one process and each kernel in the cache
cat > m.tc <<'TC'
def mlp(float(B,I) X, float(H,I) W1, float(K,H) W2) -> (Z) {
    A(b,h) +=! X(b,r_i) * W1(h,r_i)
    A(b,h) = fmax(A(b,h), 0)
    Z(b,k) +=! A(b,r_h) * W2(k,r_h)
}
def xent(float(B,K) Z, int64(B) Y) -> (L) {
    s(b) +=! exp(Z(b,r_k))
    L +=! (log(s(r_b)) - Z(r_b, Y(r_b))) / B
}
TC
targs="m.tc --train mlp,xent --params W1,W2 --shape X=8x6 --shape Y=8 --shape W1=5x6
       --shape W2=3x5 --generations 2 --population 4 --seed 3 --runs 2 --min-time 0.001
       --final-candidates 1 --final-rounds 2 --final-time 0.001 --final-warmup 0.001
       --compile-timeout 3 --timeout 2 --jobs 1 --threads 1"
jobs_as_one t "a step" 5 $targs
"$TCOMP" cache list --cache t3.sqlite > t3.list
for def in mlp_fwd xent_fwd xent_grad mlp_grad sgd; do
  grep -q " $def " t3.list || fail "no cache entry for $def: $(cat t3.list)"
done

# Ctrl-C: mpirun sends its ranks SIGCONT, SIGTERM a second later and
# SIGKILL a second after that.  The serving ranks send their runs with each
# progress message, so rank 0's cache holds both running kernels' runs
# before any ends, and keeps them through the kill.  A SIGINT to rank 0
# alone (the process its first line names) stops the run gracefully: both
# kernels stop early, each with its best.  The job folders of killed ranks
# go when a rank of this machine next starts.
cat > long.txt <<'TXT'
mm.tc --shape A=64x64 --shape B=64x64
rows.tc -e rowsum --shape X=256x256
TXT
largs="--batch long.txt --generations 200 --population 8 --seed 7 --runs 2 --min-time 0.001
       --final-candidates 1 --final-rounds 2 --final-time 0.001 --final-warmup 0.001
       --compile-timeout 10 --timeout 5 --jobs 1"
mkdir tmp
runs_of() { "$TCOMP" cache export --cache "$1" 2>/dev/null | grep -c "\"entry\":\"$2\"" || true; }
# interrupt NAME WHOM ENTRIES ARGS...: start autotune ARGS on three ranks,
# wait for 3 runs of each of ENTRIES in rank 0's cache, SIGINT to WHOM
# (mpirun: as a Ctrl-C does; rank0), wait; the runs in the cache before
# the signal in $before
interrupt() {
  name=$1 whom=$2 entries=$3
  shift 3
  TMPDIR="$dir/tmp" timeout 150 "$MPIRUN" --oversubscribe -n 3 "$TCOMP" autotune "$@" \
    --cache $name.sqlite > $name.out 2> $name.err &
  pid=$!
  i=0
  while [ $i -lt 600 ]; do
    seen=0
    for e in $entries; do
      [ "$(runs_of $name.sqlite $e)" -ge 3 ] && seen=$((seen + 1))
    done
    [ $seen -eq $(echo $entries | wc -w) ] && break
    kill -0 $pid 2> /dev/null || fail "$name: the run ended before the signal: $(cat $name.err)"
    sleep 0.2
    i=$((i + 1))
  done
  [ $i -lt 600 ] || fail "$name: rank 0's cache has too few runs of $entries after 120 s"
  before=$("$TCOMP" cache export --cache $name.sqlite | wc -l)
  if [ "$whom" = rank0 ]; then
    rank0=$(sed -n 's/^tcomp: rank 0 is process \([0-9]*\) .*/\1/p' $name.err)
    [ -n "$rank0" ] || fail "$name: rank 0 does not say its process: $(cat $name.err)"
    kill -INT "$rank0"
  else
    kill -INT $pid # timeout passes it on to mpirun
  fi
  wait $pid || true
}
interrupt int1 mpirun "mm rowsum" $largs
after=$("$TCOMP" cache export --cache int1.sqlite | wc -l)
[ "$after" -ge "$before" ] || fail "after a Ctrl-C the cache has $after runs, before it $before"
interrupt int2 rank0 "mm rowsum" $largs
grep -q "^# 2 of 2 kernels tuned in .*; stopped early" int2.out ||
  fail "a SIGINT to rank 0: $(cat int2.out int2.err)"
[ "$("$TCOMP" cache export --cache int2.sqlite | wc -l)" -ge "$before" ] || fail "runs lost"
# a single def, its generations over the ranks: the same graceful stop
interrupt int3 rank0 mm mm.tc --shape A=64x64 --shape B=64x64 $(echo "$largs" | sed 's/--batch long.txt//')
grep -q "^# .* candidates .*; stopped early" int3.out && grep -q "^target=cpu" int3.out ||
  fail "a SIGINT to rank 0 of a single def: $(cat int3.out int3.err)"
# a short run's ranks remove what killed ones left (of this machine, their
# process gone), and nothing else
host=$(hostname | tr -c 'A-Za-z0-9._\n' '_')
sh -c 'exit 0' & dead=$!
wait $dead
mkdir "tmp/tcomp-rank-$host-$dead-AbC123" "tmp/tcomp-rank-$host-$$-AbC123" \
  "tmp/tcomp-rank-other$host-$dead-AbC123"
touch "tmp/tcomp-rank-$host-$dead-AbC123/kernels.sqlite"
TMPDIR="$dir/tmp" mpirun -n 3 "$TCOMP" autotune $bargs --no-cache > /dev/null 2> clean.err ||
  fail "after the signals: $(cat clean.err)"
left=$(ls "$dir/tmp" | grep "^tcomp-rank-" | sort | tr '\n' ' ')
want=$(printf 'tcomp-rank-%s\n' "$host-$$-AbC123" "other$host-$dead-AbC123" | sort | tr '\n' ' ')
[ "$left" = "$want" ] || fail "job folders in TMPDIR: $left (want $want)"

printf 'mm.tc --shape A=4x4 --shape B=4x4\nmm.tc --shape A=4x4 --bogus\n' > bad.txt
if "$TCOMP" autotune --batch bad.txt > bad.out 2> bad.err; then fail "a bad batch line was taken"; fi
grep -q "bad.txt:2: " bad.err || fail "the bad batch line is not named: $(cat bad.err)"

echo "ok: 3 ranks chose as one process ($counts of $total measured by rank), survived a killed rank, filled one cache ($rows runs), tuned a batch a kernel per rank ($r3 runs) and a training step's five kernels, and kept every run through a Ctrl-C ($after runs) and stopped gracefully on a SIGINT to rank 0"
