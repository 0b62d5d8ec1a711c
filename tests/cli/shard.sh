#!/bin/sh
# shard.sh KBSIM SRCDIR WORKDIR CASE — job arrays without MPI: kbsim
# --shard I/N and --merge through the binary (docs/cluster.md). Each CASE
# prints "CASE ok".
set -u
kbsim=$1 src=$2 work=$3 case=$4
points=$src/tests/cli/cases/shard_points.lua
rm -rf "$work" && mkdir -p "$work/tmp" && cd "$work" || exit 1
# the shards' scratch output folders go here: none may be left
TMPDIR=$work/tmp; export TMPDIR
fail() { echo "FAIL ($case): $*"; [ -f log ] && cat log; exit 1; }
# the files of folder $1 but its cache, one per line
outputs() { (cd "$1" && find . -path ./cache -prune -o -type f -print | sort); }
# the points shard $1 (e.g. 2/3) listed for sweep $2 in log
listed() { sed -n "s|^shard $1: sweep '$2': points\{0,1\} \([0-9,]*\) cached;.*|\1|p" log; }
no_scratch() { [ -z "$(ls "$work/tmp")" ] || fail "scratch folders left: $(ls "$work/tmp")"; }

case $case in
identical)
  # milestone_1h_ccl, two sweeps (latency: 6 points, buffer_kind: 3):
  # -j 1 against two rounds of 2 shards then --merge, and then --fast
  ccl="$src/scenarios/milestone_1h_ccl.lua"
  set -- sizes=8,64 buffer_sizes=128 matrix=no
  "$kbsim" -q -j 1 -o ref "$ccl" "$@" > ref.stdout 2>&1 || { cat ref.stdout; fail "-j 1 run"; }
  # round 1: each shard runs its share of 'latency' and ends there
  "$kbsim" -q -j 2 --shard 1/2 -o out "$ccl" "$@" > log 2>&1 || fail "shard 1/2, round 1"
  [ "$(listed 1/2 latency)" = "1,3,5" ] || fail "shard 1/2 share of latency"
  "$kbsim" -q -j 1 --shard 2/2 -o out "$ccl" "$@" > log 2>&1 || fail "shard 2/2, round 1"
  [ "$(listed 2/2 latency)" = "2,4,6" ] || fail "shard 2/2 share of latency"
  [ -z "$(outputs out)" ] || fail "a shard wrote outputs: $(outputs out)"
  # 'buffer_kind' is not cached yet: --merge refuses, naming its points
  mkdir merged && cp -r out/cache merged/ && "$kbsim" -q --merge -o merged "$ccl" "$@" > /dev/null 2> log
  [ $? -eq 1 ] || fail "--merge after round 1: exit status, want 1"
  grep -q "kbsim --merge: sweep 'buffer_kind': 3 of 3 points are not in the cache: 1,2,3;" log \
    || fail "--merge must list the missing points"
  # round 2: 'latency' is whole in the cache, the shards go on to 'buffer_kind'
  for s in 1 2; do
    "$kbsim" -q -j 2 --shard $s/2 -o out "$ccl" "$@" > log 2>&1 || fail "shard $s/2, round 2"
  done
  [ "$(listed 2/2 buffer_kind)" = "2" ] || fail "shard 2/2 share of buffer_kind"
  [ -z "$(outputs out)" ] || fail "a shard wrote outputs: $(outputs out)"
  # round 3: nothing left to run
  "$kbsim" -q --shard 1/2 -o out "$ccl" "$@" > /dev/null 2> log || fail "shard 1/2, round 3"
  grep -q "shard 1/2: every sweep of the script is in the cache" log || fail "round 3 message"
  [ -z "$(outputs out)" ] || fail "a shard wrote outputs: $(outputs out)"
  no_scratch
  cp -r out fast
  "$kbsim" -q -j 2 --merge -o out "$ccl" "$@" > merge.stdout 2> log || fail "--merge"
  "$kbsim" -j 2 --fast -o fast "$ccl" "$@" > fast.stdout 2> log || fail "--fast"
  grep -q "reused 3 of 3 points" log || fail "--fast reused the shards' points"
  for d in out fast; do
    [ "$(outputs ref)" = "$(outputs $d)" ] || fail "$d: other files than -j 1"
    for f in $(outputs ref); do cmp "ref/$f" "$d/$f" || fail "$d/$f differs from the -j 1 run"; done
  done
  ;;
shares)
  # 7 points in 3 shards: 1,4,7 / 2,5 / 3,6 whatever the threads
  for j in 1 4; do
    for s in 1 2 3; do
      "$kbsim" -j $j --shard $s/3 -o out$j "$points" > log 2>&1 || fail "shard $s/3 -j $j"
      grep -q "squares.csv\|shard_points:" log && fail "the shard went past its sweep"
      echo "$s $(listed $s/3 squares)" >> shares$j
    done
  done
  printf '1 1,4,7\n2 2,5\n3 3,6\n' | cmp - shares1 || fail "shares: $(cat shares1)"
  cmp shares1 shares4 || fail "the shares depend on --jobs: $(cat shares4)"
  # sizes differ by at most one, for other counts too
  for n in 1 2 10 11 12; do
    sizes=
    for s in 1 2 3; do
      "$kbsim" -q --shard $s/3 -o n$n "$points" n=$n > log 2>&1 || fail "n=$n shard $s/3"
      l=$(listed $s/3 squares)
      sizes="$sizes $(echo "$l" | tr ',' '\n' | grep -c .)"
    done
    set -- $sizes
    max=$1 min=$1
    for k; do [ $k -gt $max ] && max=$k; [ $k -lt $min ] && min=$k; done
    [ $((max - min)) -le 1 ] || fail "n=$n: share sizes$sizes"
    [ $(($1 + $2 + $3)) -eq $n ] || fail "n=$n: shares hold $(($1 + $2 + $3)) points"
  done
  # more shards than points: an empty share ends the run at once
  "$kbsim" --shard 3/3 -o small "$points" n=2 > log 2>&1 || fail "empty share"
  grep -q "shard 3/3: sweep 'squares': none of its 2 points is in this share" log || fail "empty share message"
  [ ! -e small/cache/squares ] || [ -z "$(ls small/cache/squares)" ] || fail "empty share cached points"
  no_scratch
  ;;
missing)
  # every shard done but point 5's entry is gone: --merge lists it
  for s in 1 2 3; do "$kbsim" -q --shard $s/3 -o out "$points" > log 2>&1 || fail "shard $s/3"; done
  for s in 1 2 3; do "$kbsim" -q --shard $s/3 -o out "$points" > log 2>&1 || fail "shard $s/3, round 2"; done
  # a sweep with cache = false runs whole in a shard and in the merge
  "$kbsim" --shard 2/3 -o out "$points" > log 2>&1 || fail "shard 2/3, round 3"
  grep -q "shard_points: 7 squares, 7 cubes, 7 uncached" log || fail "round 3: the uncached sweep"
  grep -q "shard 2/3: every sweep of the script is in the cache" log || fail "round 3 message"
  [ -z "$(outputs out)" ] || fail "a shard wrote outputs: $(outputs out)"
  cp -r out whole && "$kbsim" --merge -o whole "$points" > log 2>&1 || fail "--merge"
  grep -q "shard_points: 7 squares, 7 cubes, 7 uncached" log || fail "--merge: rows"
  [ "$(outputs whole)" = "$(printf './cubes.csv\n./squares.csv')" ] || fail "--merge outputs: $(outputs whole)"
  rm "$(grep -l '"point": 5,' out/cache/squares/*.json)" || fail "no entry of point 5"
  "$kbsim" --merge -o out "$points" > log 2>&1
  rc=$?
  [ $rc -eq 1 ] || fail "--merge exit status $rc, want 1"
  grep -q "kbsim --merge: sweep 'squares': 1 of 7 points is not in the cache: 5;" log || fail "message"
  [ -z "$(outputs out)" ] || fail "--merge wrote outputs from partial rows: $(outputs out)"
  # a point that fails in a shard is not cached: the shard exits 1 and
  # --merge names it
  rm -rf out
  KBSIM_TEST_FAIL=4 "$kbsim" --shard 1/3 -o out "$points" > log 2>&1
  rc=$?
  [ $rc -eq 1 ] || fail "failing point: exit status $rc, want 1"
  grep -q "shard 1/3: sweep 'squares': points 1,7 cached;" log || fail "failing point: the share line"
  grep -q "kb.sweep 'squares': 1 of 7 points failed: point 4: .*deliberate failure in point 4" log \
    || fail "failing point: report"
  for s in 2 3; do "$kbsim" -q --shard $s/3 -o out "$points" > log 2>&1 || fail "shard $s/3"; done
  "$kbsim" --merge -o out "$points" > log 2>&1
  [ $? -eq 1 ] && grep -q "1 of 7 points is not in the cache: 4;" log || fail "--merge after a failed point"
  ;;
bad)
  for v in 0/2 3/2 2 a/b 1/0 1/2x -1/2 /2 1/ 1/+2 " 1/2" 99999999999999999999/2; do
    "$kbsim" --shard "$v" "$points" > log 2>&1
    rc=$?
    [ $rc -eq 2 ] || fail "--shard '$v': exit status $rc, want 2"
    grep -q "kbsim: bad value '$v' for '--shard' (expected I/N" log || fail "--shard '$v': message"
  done
  "$kbsim" --shard > log 2>&1
  [ $? -eq 2 ] && grep -q "option '--shard' needs a value" log || fail "--shard without a value"
  "$kbsim" --shard 1/2 --merge "$points" > log 2>&1
  [ $? -eq 2 ] && grep -q "exclude each other" log || fail "--shard with --merge"
  "$kbsim" --merge=yes "$points" > log 2>&1
  [ $? -eq 2 ] && grep -q "option '--merge' takes no value" log || fail "--merge=yes"
  "$kbsim" --shard=1/2 --trace t.json "$points" > log 2>&1
  [ $? -eq 2 ] && grep -q "cannot be used with --shard or --merge" log || fail "--trace with --shard"
  ;;
stale)
  # a writer killed mid-write (kill -9) leaves its temporary file in the
  # cache: the next run of the sweep removes those of this host's dead
  # processes and keeps the others (a live writer's, another host's)
  "$kbsim" -q -j 1 -o out "$points" n=3 > log 2>&1 || fail "first run"
  sh -c 'exit 0' & dead=$!
  wait $dead
  c=out/cache/squares host=$(hostname | tr / _)
  gone="0000000000000001.json.$host.$dead.0.tmp" live="0000000000000002.json.$host.$$.7.tmp"
  other="0000000000000003.json.not-$host.$dead.0.tmp" odd="notes.$host.$dead.tmp"
  for f in "$gone" "$live" "$other" "$odd"; do echo '{"half' > "$c/$f"; done
  "$kbsim" -q -j 1 -o out "$points" n=3 > log 2>&1 || fail "second run"
  [ ! -e "$c/$gone" ] || fail "a dead writer's temporary file was left"
  for f in "$live" "$other" "$odd"; do [ -e "$c/$f" ] || fail "'$f' was removed"; done
  [ "$(wc -l < out/squares.csv)" -eq 4 ] || fail "3 rows"
  ;;
*)
  fail "unknown case" ;;
esac
echo "$case ok"
