#!/bin/sh
# milestone.sh KBSIM SRCDIR WORKDIR — the milestone scenario end to end on a
# reduced sweep: columns and row counts, checks, figures, byte-identical
# CSV with -j 1 and -j 2, --fast reuse and re-run, a bad references file.
set -u
kbsim=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
run() { "$kbsim" -q "$@" "$src/scenarios/milestone_1h_ccl.lua" sizes=8,512,4096 buffer_sizes=128,1024; }

run -j 1 -o "$work/j1" > "$work/j1.log" 2>&1 || { cat "$work/j1.log"; fail "run with -j 1"; }
run -j 2 -o "$work/j2" > "$work/j2.log" 2>&1 || { cat "$work/j2.log"; fail "run with -j 2"; }
grep -q "all checks passed" "$work/j1.log" || fail "checks did not pass"
for f in summary.csv buffer_kind_sweep.csv matrix.csv; do
  cmp -s "$work/j1/$f" "$work/j2/$f" || fail "$f differs between -j 1 and -j 2"
done
head -1 "$work/j1/summary.csv" | grep -q '^algorithm,sip_topology,n_sips,n_elem,bytes_per_pe,bytes_per_sip,latency_ns,algbw_gbps,busbw_gbps' \
  || fail "summary.csv columns: $(head -1 "$work/j1/summary.csv")"
head -1 "$work/j1/buffer_kind_sweep.csv" | grep -q '^buffer_kind,sip_topology,n_sips,n_elem,bytes_per_pe,latency_ns$' \
  || fail "buffer_kind_sweep.csv columns"
[ "$(wc -l < "$work/j1/summary.csv")" -eq 10 ] || fail "summary.csv: 9 rows expected"
[ "$(wc -l < "$work/j1/buffer_kind_sweep.csv")" -eq 7 ] || fail "buffer_kind_sweep.csv: 6 rows expected"
[ "$(grep -c ',passed$' "$work/j1/matrix.csv")" -eq 8 ] || fail "matrix: 8 passed cases expected"
for fig in latency_ring_1d latency_torus_2d latency_mesh_2d_no_wrap buffer_kind comparison topology; do
  [ -f "$work/j1/$fig.gp" ] || fail "no $fig.gp"
  if command -v gnuplot >/dev/null 2>&1; then
    [ -s "$work/j1/$fig.svg" ] && [ -s "$work/j1/$fig.png" ] || fail "$fig not rendered"
  fi
done
grep -q "comparison.gp" "$work/j1/index.md" || fail "index.md lists the figures"

# --fast: nothing changed, every point comes from the cache; then one changes
# (no -q here: the reuse count is reported on stderr unless quiet)
"$kbsim" -j 2 -o "$work/j1" --fast "$src/scenarios/milestone_1h_ccl.lua" sizes=8,512,4096 \
  buffer_sizes=128,1024 > "$work/fast.log" 2>&1 || fail "--fast run"
grep -q "reused 9 of 9 points" "$work/fast.log" || { cat "$work/fast.log"; fail "--fast did not reuse the latency sweep"; }
"$kbsim" -j 2 -o "$work/j1" --fast "$src/scenarios/milestone_1h_ccl.lua" sizes=8,512,2048 \
  buffer_sizes=128,1024 > "$work/fast2.log" 2>&1 || fail "--fast run with a changed size"
# script arguments are part of every point's key: all run again
grep -q "'latency': reused 0 of 9 points" "$work/fast2.log" || { cat "$work/fast2.log"; fail "--fast did not re-run after a change"; }
grep -q "2048 *4096" "$work/fast2.log" || fail "the changed size was simulated"

# a references file with a bad row
printf 'name,kind,bytes_per_pe,latency_ns,intercept_ns,slope_ns,slope_bits\nx,point,abc,1,,,\n' > "$work/bad.csv"
"$kbsim" -q -o "$work/bad" "$src/scenarios/milestone_1h_ccl.lua" sizes=8 buffer_sizes=128 \
  refs="$work/bad.csv" > "$work/bad.log" 2>&1
[ $? -eq 2 ] || fail "a bad references file must exit 2"
grep -q "bad.csv:2: bytes_per_pe: 'abc' is not a number" "$work/bad.log" || { cat "$work/bad.log"; fail "bad references message"; }
# --set reaches the topology and ccl.yaml of every point
"$kbsim" -q -o "$work/set" --set ucie.connections=1 --set ccl.backpressure=poll \
  "$src/scenarios/milestone_1h_ccl.lua" sizes=4096 buffer_sizes=128 matrix=no > "$work/set.log" 2>&1 \
  || { cat "$work/set.log"; fail "a run with --set"; }
grep -q "all checks passed" "$work/set.log" || fail "checks with --set"
# failing points (a 2x3 torus cannot have 4 SIPs) leave the others' rows
"$kbsim" -q -o "$work/fail" --set sips.count=4 "$src/scenarios/milestone_1h_ccl.lua" sizes=8,64 \
  buffer_sizes=128 matrix=no > "$work/fail.log" 2>&1
[ $? -eq 1 ] || { cat "$work/fail.log"; fail "failed points must exit 1"; }
grep -q "kb.sweep 'latency': 4 of 6 points failed" "$work/fail.log" || { cat "$work/fail.log"; fail "failure summary"; }
[ "$(grep -c '^lrab,ring_1d,4,' "$work/fail/summary.csv")" -eq 2 ] || fail "the ring rows (4 SIPs) are kept"
echo "milestone ok"
