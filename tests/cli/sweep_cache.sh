#!/bin/sh
# sweep_cache.sh KBSIM SRCDIR WORKDIR CASE — kb.sweep's cache, Ctrl-C and
# timeouts through the kbsim binary, on cases/sweep_spin.lua (points that
# may spin for ever, in C or in Lua). Each CASE prints "CASE ok".
# No timing is asserted: waits poll for a file or for exit, with a
# generous bound (20 s) that only catches a hang.
set -u
kbsim=$1 src=$2 work=$3 case=$4
script=$src/tests/cli/cases/sweep_spin.lua
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
fail() { echo "FAIL ($case): $*"; [ -f log ] && cat log; exit 1; }

# waits until file $1 exists (a point created it)
wait_file() {
  n=0
  while [ ! -e "$1" ]; do
    n=$((n + 1)); [ $n -le 200 ] || fail "no $1 after 20 s"
    sleep 0.1
  done
}
# waits until process $1 has exited
wait_exit() {
  n=0
  while kill -0 "$1" 2>/dev/null; do
    n=$((n + 1)); [ $n -le 200 ] || { kill -9 "$1"; fail "kbsim still running 20 s after the signal"; }
    sleep 0.1
  done
}
# the number of cache entries of the sweep, and stray temporary files
n_entries() { ls out/cache/spin 2>/dev/null | grep -c '^[0-9a-f]*\.json$'; }
n_temps() { ls -a out/cache/spin 2>/dev/null | grep -c 'tmp'; }

case $case in
interrupt_twice)
  # point 3 spins inside string.find: the first Ctrl-C cannot reach it,
  # the second leaves it behind; points 1 and 2 are kept
  KBSIM_TEST_SPIN=3 KBSIM_TEST_MARK=$work/mark "$kbsim" -j 1 -o out "$script" > log 2>&1 &
  pid=$!
  wait_file mark.3
  kill -INT $pid; sleep 0.5; kill -INT $pid
  wait_exit $pid
  wait $pid; rc=$?
  [ $rc -eq 130 ] || fail "exit status $rc, want 130"
  grep -q "spin: rows=2 done=2 failed=0 not_run=4" log || fail "summary"
  grep -q "stopped by Ctrl-C: 2 of 6 points done, 4 not run" log || fail "report"
  [ "$(tr '\n' ' ' < out/spin.csv)" = "i 1 2 " ] || fail "spin.csv: $(cat out/spin.csv)"
  [ "$(n_entries)" -eq 2 ] || fail "2 cache entries expected, got $(n_entries)"
  "$kbsim" -j 1 --fast -o out "$script" > log 2>&1 || fail "--fast run"
  grep -q "reused 2 of 6 points" log || fail "--fast did not reuse the finished points"
  ;;
kill9)
  # kill -9 while point 4 runs: points 1-3 are already in the cache
  KBSIM_TEST_SPIN=4 KBSIM_TEST_MARK=$work/mark "$kbsim" -j 1 -o out "$script" > log 2>&1 &
  pid=$!
  wait_file mark.4
  kill -9 $pid
  wait $pid 2>/dev/null
  [ "$(n_entries)" -eq 3 ] || fail "3 cache entries expected, got $(n_entries)"
  "$kbsim" -j 2 --fast -o out "$script" > log 2>&1 || fail "--fast run"
  grep -q "kb.sweep 'spin': reused 3 of 6 points from the cache" log || fail "--fast did not reuse points 1-3"
  grep -q "spin: rows=6 done=6 failed=0 not_run=0 reused=3" log || fail "summary"
  ;;
concurrent)
  # two kbsim processes fill one cache at once (same keys, 2 threads each)
  "$kbsim" -q -j 2 -o out "$script" 200 > log1 2>&1 &
  p1=$!
  "$kbsim" -q -j 2 -o out "$script" 200 > log2 2>&1 &
  p2=$!
  wait $p1 || { cat log1; fail "first writer"; }
  wait $p2 || { cat log2; fail "second writer"; }
  [ "$(n_entries)" -eq 200 ] || fail "200 cache entries expected, got $(n_entries)"
  [ "$(n_temps)" -eq 0 ] || fail "temporary files left: $(ls out/cache/spin | grep tmp | head -3)"
  "$kbsim" -j 2 --fast -o out "$script" 200 > log 2>&1 || fail "--fast run"
  grep -q "reused 200 of 200 points" log || fail "every entry must read back"
  grep -q "warning" log && fail "warnings"
  ;;
timeout)
  # --point-timeout: point 2 spins in C (abandoned), point 4 in Lua
  # (stopped by the hook); the others finish and are written
  KBSIM_TEST_SPIN=2 "$kbsim" -j 2 --point-timeout 0.5 -o out "$script" > log 2>&1
  rc=$?
  [ $rc -eq 1 ] || fail "exit status $rc, want 1"
  grep -q "kb.sweep 'spin': point 2 failed: timed out: still running after its timeout of 0.5 s" log \
    || fail "timeout message (C)"
  KBSIM_TEST_SPIN=4 KBSIM_TEST_SPIN_LUA=1 "$kbsim" -j 2 -o out2 "$script" 6 0.25 > log 2>&1
  rc=$?
  [ $rc -eq 1 ] || fail "exit status $rc, want 1 (kb.sweep timeout)"
  grep -q "kb.sweep 'spin': 1 of 6 points failed: point 4: timed out: still running after its timeout of 0.25 s" log \
    || fail "timeout message (Lua, kb.sweep timeout)"
  grep -q "spin: rows=5 done=5 failed=1 not_run=0" log || fail "the sweep goes on"
  [ "$(tr '\n' ' ' < out2/spin.csv)" = "i 1 2 3 5 6 " ] || fail "spin.csv: $(cat out2/spin.csv)"
  # a timeout changes no result: not part of the cache key
  "$kbsim" -j 2 --fast --point-timeout 30 -o out2 "$script" 6 0.25 > log 2>&1 || fail "--fast run"
  grep -q "reused 5 of 6 points" log || fail "--point-timeout changed the cache keys"
  "$kbsim" -o out3 --point-timeout 0 "$script" > log 2>&1
  [ $? -eq 2 ] && grep -q "bad value '0' for '--point-timeout'" log || fail "--point-timeout 0"
  "$kbsim" -o out3 "$script" 6 -1 > log 2>&1
  [ $? -eq 2 ] && grep -q "kb.sweep: 'timeout' must be a positive number of seconds" log \
    || fail "kb.sweep timeout -1"
  ;;
disk_full)
  # files of at most 8 KiB (ulimit -f counts 512-byte blocks in sh): the
  # 16 KiB cache entries cannot be written, the small CSV can
  ( ulimit -f 16; trap '' XFSZ; exec "$kbsim" -j 2 -o out "$script" 6 - 16384 ) 2>&1 | cat > log
  grep -q "spin: rows=6 done=6 failed=0" log || fail "rows"
  grep -q "kb.sweep 'spin': warning: 6 points not cached: cannot write '.*': File too large" log \
    || fail "warning"
  [ "$(wc -l < out/spin.csv)" -eq 7 ] || fail "spin.csv must hold 6 rows"
  [ "$(n_entries)" -eq 0 ] && [ "$(n_temps)" -eq 0 ] || fail "no entry, no temporary file"
  # at most 2 KiB: the probe's scratch file (4 KiB) does not fit
  ( ulimit -f 4; trap '' XFSZ; exec "$kbsim" -j 2 -o out2 "$script" ) 2>&1 | cat > log
  grep -q "spin: rows=6 done=6 failed=0" log || fail "rows (probe)"
  grep -q "kb.sweep 'spin': warning: cannot write the cache in 'out2/cache/spin': File too large; no point of this sweep is cached" log \
    || fail "probe warning"
  ;;
unwritable)
  # the sweep's cache folder is /dev/full
  mkdir -p out/cache && ln -s /dev/full out/cache/spin
  "$kbsim" -j 2 -o out "$script" > log 2>&1 || fail "exit status $?"
  grep -q "kb.sweep 'spin': warning: cannot write the cache in 'out/cache/spin': Not a directory" log \
    || fail "warning"
  [ "$(wc -l < out/spin.csv)" -eq 7 ] || fail "spin.csv must hold 6 rows"
  # a directory in place of one cache file: that point is not cached,
  # then with --fast it runs again
  "$kbsim" -j 2 -o out2 "$script" > log 2>&1 || fail "first run"
  f=$(ls out2/cache/spin | head -1)
  rm "out2/cache/spin/$f" && mkdir "out2/cache/spin/$f"
  "$kbsim" -j 2 -o out2 "$script" > log 2>&1 || fail "run with a directory in place of a cache file"
  grep -q "kb.sweep 'spin': warning: 1 point not cached: cannot write 'out2/cache/spin/$f': Is a directory" log \
    || fail "warning (directory)"
  [ "$(wc -l < out2/spin.csv)" -eq 7 ] || fail "spin.csv must hold 6 rows (directory)"
  "$kbsim" -j 2 --fast -o out2 "$script" > log 2>&1 || fail "--fast run"
  grep -q "warning: point [1-6]: ignoring the cache file 'out2/cache/spin/$f', which is not a valid entry; the point runs again" log \
    || fail "--fast warning (directory)"
  grep -q "reused 5 of 6 points" log || fail "--fast reuse (directory)"
  # an endless device in place of a cache file is not read for ever
  f=$(ls out2/cache/spin | grep -v "^$f\$" | head -1)
  rm "out2/cache/spin/$f" && ln -s /dev/zero "out2/cache/spin/$f"
  "$kbsim" -j 2 --fast -o out2 "$script" > log 2>&1 || fail "--fast run (/dev/zero)"
  grep -q "warning: point [1-6]: ignoring the cache file 'out2/cache/spin/$f'" log \
    || fail "--fast warning (/dev/zero)"
  ;;
corpus)
  # malformed cache entries: each is ignored with a warning, its point
  # runs again, nothing crashes
  corpus=$src/tests/cli/data/cache_corpus
  n=$(ls "$corpus" | wc -l)
  total=$((n + 2))
  "$kbsim" -q -j 2 -o out "$script" $total > log 2>&1 || fail "first run"
  ls out/cache/spin | sort > entries
  i=0
  for c in "$corpus"/*; do
    i=$((i + 1))
    cp "$c" "out/cache/spin/$(sed -n "${i}p" entries)"
  done
  "$kbsim" -j 2 --fast -o out "$script" $total > log 2>&1 || fail "--fast run: exit status $?"
  [ "$(grep -c "ignoring the cache file" log)" -eq $n ] || fail "$n warnings expected"
  grep -q "reused 2 of $total points" log || fail "the 2 good entries are reused"
  grep -q "spin: rows=$total done=$total failed=0" log || fail "every point has its row"
  # the entries were rewritten: all good now
  "$kbsim" -j 2 --fast -o out "$script" $total > log 2>&1 || fail "second --fast run"
  grep -q "reused $total of $total points" log || fail "rewritten entries"
  ;;
damaged_keys)
  # an entry with its own key whose "row" key is damaged (renamed, as
  # tests/fuzz/cache_fuzz.lua found), or whose point is not a number: not
  # an entry; the point runs again and keeps its row
  "$kbsim" -q -j 2 -o out "$script" > log 2>&1 || fail "first run"
  f=$(ls out/cache/spin | head -1)
  g=$(ls out/cache/spin | sed -n 2p)
  sed 's/"row":/"r~ow":/' "out/cache/spin/$f" > tmp && mv tmp "out/cache/spin/$f"
  sed 's/"point": \([0-9]*\)/"point": "\1"/' "out/cache/spin/$g" > tmp && mv tmp "out/cache/spin/$g"
  grep -q '"r~ow":' "out/cache/spin/$f" && grep -q '"point": "' "out/cache/spin/$g" || fail "sed"
  "$kbsim" -j 2 --fast -o out "$script" > log 2>&1 || fail "--fast run: exit status $?"
  [ "$(grep -c "ignoring the cache file" log)" -eq 2 ] || fail "2 warnings expected"
  grep -q "reused 4 of 6 points" log || fail "the 4 good entries are reused"
  grep -q "spin: rows=6 done=6 failed=0" log || fail "every point has its row"
  ;;
*)
  fail "unknown case" ;;
esac
echo "$case ok"
