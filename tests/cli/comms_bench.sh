#!/bin/sh
# comms_bench.sh KBSIM SRCDIR WORKDIR — the communication benchmark end to
# end: a reduced sweep (two collectives, sizes 16 B..4 KiB, checked up to
# 1 KiB, timing-only above) with -j 1 and -j 2 (byte-identical CSV),
# columns, row counts, checks, the fit and analytic tables, figure files;
# then the same analysis on the PARAM fixture; then bad arguments.
set -u
kbsim=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
run() { "$kbsim" -q "$@" "$src/scenarios/comms_bench.lua" collectives=all_reduce,all_gather \
  min=16 max=4KiB check_max=1KiB ws=2; }

run -j 1 -o "$work/j1" > "$work/j1.log" 2>&1 || { cat "$work/j1.log"; fail "run with -j 1"; }
run -j 2 -o "$work/j2" > "$work/j2.log" 2>&1 || { cat "$work/j2.log"; fail "run with -j 2"; }
grep -q "simulated: 18 rows, 2 collectives, all checks passed" "$work/j1.log" \
  || { cat "$work/j1.log"; fail "summary line"; }
for f in comms_bench.csv bandwidth.csv fit.csv prediction.csv analytic.csv; do
  [ -f "$work/j1/$f" ] || fail "no $f"
  cmp -s "$work/j1/$f" "$work/j2/$f" || fail "$f differs between -j 1 and -j 2"
done
head -1 "$work/j1/comms_bench.csv" | grep -qx 'collective,algorithm,world_size,size,elements_per_rank,latency_us,algbw_gbps,busbw_gbps,check,timing_only' \
  || fail "comms_bench.csv columns: $(head -1 "$work/j1/comms_bench.csv")"
[ "$(wc -l < "$work/j1/comms_bench.csv")" -eq 19 ] || fail "comms_bench.csv: 18 rows expected"
# 16..1024 B checked (7 sizes), 2 and 4 KiB timing-only, per collective
[ "$(grep -c ',passed,false$' "$work/j1/comms_bench.csv")" -eq 14 ] || fail "14 checked rows expected"
[ "$(grep -c ',skipped,true$' "$work/j1/comms_bench.csv")" -eq 4 ] || fail "4 timing-only rows expected"
grep -q '^all_gather,all_gather,2,4096,1024,' "$work/j1/comms_bench.csv" || fail "all_gather 4 KiB row"
head -1 "$work/j1/analytic.csv" | grep -q '^collective,formula,size,simulated_us,alpha_beta_us,loggp_us' \
  || fail "analytic.csv columns"
[ "$(wc -l < "$work/j1/analytic.csv")" -eq 19 ] || fail "analytic.csv: 18 rows expected"
grep -q '^all_reduce,9,fitted,' "$work/j1/fit.csv" || { cat "$work/j1/fit.csv"; fail "all_reduce fitted"; }
grep -q 'all_reduce      GMAE' "$work/j1.log" || fail "GMAE printed"
grep -q '>400 %' "$work/j1.log" || fail "histogram printed"
[ -f "$work/j1/fit_all_reduce.lua" ] || fail "saved fit parameters"
for fig in latency bandwidth fit_all_reduce fit_all_gather analytic; do
  [ -f "$work/j1/$fig.gp" ] || fail "no $fig.gp"
  if command -v gnuplot >/dev/null 2>&1; then
    [ -s "$work/j1/$fig.svg" ] && [ -s "$work/j1/$fig.png" ] || fail "$fig not rendered"
  fi
  grep -q "$fig.gp" "$work/j1/index.md" || fail "index.md lists $fig"
done

# the same analysis on measured data: the PARAM fixture
"$kbsim" -q -o "$work/param" "$src/scenarios/comms_bench.lua" \
  param="$src/tests/cli/data/param_comms.txt" > "$work/param.log" 2>&1 \
  || { cat "$work/param.log"; fail "param run"; }
# measured rows are not checked: the summary says so, never "all checks passed"
grep -q "param: 20 rows, 2 collectives, measured data, not checked; read in" "$work/param.log" \
  || { cat "$work/param.log"; fail "param summary"; }
! grep -q "all checks passed" "$work/param.log" || fail "param mode claims checks it did not make"
# the rows are measured: a --topology would be silently unused, so it is refused
"$kbsim" -q -o "$work/param_topo" --topology "$src/tests/cli/cases/topo.yaml" \
  "$src/scenarios/comms_bench.lua" param="$src/tests/cli/data/param_comms.txt" > "$work/param_topo.log" 2>&1
[ $? -eq 2 ] || { cat "$work/param_topo.log"; fail "--topology with param= must exit 2"; }
grep -q "comms_bench: --topology .*topo.yaml is not used with param=: the rows are measured, not simulated" \
  "$work/param_topo.log" || { cat "$work/param_topo.log"; fail "--topology with param= message"; }
grep -q '^all_reduce,measured,,134217728,33554432,274.6,488.787,733.18,measured,false$' \
  "$work/param/comms_bench.csv" || fail "param row"
grep -q '^all_reduce,16,fitted,' "$work/param/fit.csv" || fail "param all_reduce fitted"
# four all_to_all rows cannot be fitted: said so, data kept and plotted
grep -q "all_to_all      not fitted: need at least 6 points" "$work/param.log" || fail "all_to_all not fitted"
[ -f "$work/param/fit_all_to_all.gp" ] || fail "data-only figure"
[ ! -f "$work/param/analytic.csv" ] || fail "no analytic table for measured data"

# bad input
"$kbsim" -q -o "$work/bad" "$src/scenarios/comms_bench.lua" collectives=all_reduse > "$work/bad.log" 2>&1
[ $? -eq 2 ] || fail "an unknown collective must exit 2"
grep -q "comms_bench: collectives: 'all_reduse' is not one of all_reduce, all_gather, reduce_scatter, all_to_all, broadcast (nearest: all_reduce)" "$work/bad.log" || fail "unknown collective message"
"$kbsim" -q -o "$work/bad" "$src/scenarios/comms_bench.lua" \
  param="$src/tests/cli/data/param_malformed.txt" > "$work/bad2.log" 2>&1
[ $? -eq 2 ] || fail "a malformed PARAM file must exit 2"
grep -q "param_malformed.txt:6: malformed COMMS-RES row" "$work/bad2.log" || { cat "$work/bad2.log"; fail "malformed row message"; }
# an algorithm that does not fit the world size: one message before any
# point runs, exit 2
"$kbsim" -q -o "$work/bad3" "$src/scenarios/comms_bench.lua" algorithm=lrab \
  collectives=all_reduce max=64 > "$work/bad3.log" 2>&1
[ $? -eq 2 ] || fail "lrab on 8 ranks must exit 2"
grep -q "comms_bench: 'lrab' runs on PE 0 of every cube: world size must be 32, got 8" \
  "$work/bad3.log" || { cat "$work/bad3.log"; fail "world size message"; }
[ "$(wc -l < "$work/bad3.log")" -eq 1 ] || { cat "$work/bad3.log"; fail "one message, not one per point"; }

# an algorithm without a closed form: the simulation and fit, no analytic figure
"$kbsim" -q -o "$work/lrab" "$src/scenarios/comms_bench.lua" algorithm=lrab ws=32 \
  collectives=all_reduce max=4KiB check_max=64 > "$work/lrab.log" 2>&1 \
  || { cat "$work/lrab.log"; fail "lrab run"; }
grep -q "all_reduce      no closed form for algorithm 'lrab'" "$work/lrab.log" \
  || { cat "$work/lrab.log"; fail "no closed form said"; }
grep -q "simulated: 11 rows, 1 collectives, all checks passed" "$work/lrab.log" \
  || { cat "$work/lrab.log"; fail "lrab summary"; }
grep -q '^all_reduce,lrab,32,4096,' "$work/lrab/comms_bench.csv" || fail "lrab 4 KiB row"
[ ! -f "$work/lrab/analytic.gp" ] || fail "an analytic figure without analytic rows"
# every point failing: exit 1 and the summary says so, no figure attempted
"$kbsim" -q -o "$work/allfail" --set pe.tcm.capacity=1KiB "$src/scenarios/comms_bench.lua" \
  collectives=all_reduce min=64 max=256 > "$work/allfail.log" 2>&1
[ $? -eq 1 ] || { cat "$work/allfail.log"; fail "every point failing must exit 1"; }
grep -q "simulated: 0 of 3 rows, 0 collectives, 3 points failed;" "$work/allfail.log" \
  || { cat "$work/allfail.log"; fail "all-failed summary"; }
[ ! -f "$work/allfail/latency.gp" ] || fail "no figure without a finished point"
echo "comms_bench ok"
