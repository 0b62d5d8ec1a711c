#!/bin/sh
# routing_flow.sh KBSIM SRCDIR WORKDIR — the routing / flow-control
# scenario end to end on a reduced sweep (two modes, two loads, both
# patterns): -j 1 and -j 2 give byte-identical CSVs, the columns, row
# counts and figures are there, latency rises with load, every message is
# delivered (the points' checks), and accepted throughput follows offered
# load below saturation.
set -u
kbsim=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
run() { "$kbsim" -q "$@" "$src/scenarios/routing_flow.lua" modes=wormhole_unbounded/xy,credit/xy \
  loads=4,40 window_ns=600; }
run -j 1 -o "$work/j1" > "$work/j1.log" 2>&1 || { cat "$work/j1.log"; fail "run with -j 1"; }
run -j 2 -o "$work/j2" > "$work/j2.log" 2>&1 || { cat "$work/j2.log"; fail "run with -j 2"; }
grep -q "routing_flow: 8 points, all checks passed" "$work/j1.log" || { cat "$work/j1.log"; fail "summary"; }
for f in points.csv saturation.csv points_uniform.csv points_all_to_all.csv; do
  [ -f "$work/j1/$f" ] || fail "no $f"
  cmp -s "$work/j1/$f" "$work/j2/$f" || fail "$f differs between -j 1 and -j 2"
done
# per-hop adaptive routing: -j 1 and -j 2 byte-identical too
run2() { "$kbsim" -q "$@" "$src/scenarios/routing_flow.lua" modes=credit/adaptive_hop,credit/xy \
  loads=10,30 patterns=uniform window_ns=600; }
run2 -j 1 -o "$work/h1" > "$work/h1.log" 2>&1 || { cat "$work/h1.log"; fail "adaptive_hop run with -j 1"; }
run2 -j 2 -o "$work/h2" > "$work/h2.log" 2>&1 || { cat "$work/h2.log"; fail "adaptive_hop run with -j 2"; }
cmp -s "$work/h1/points.csv" "$work/h2/points.csv" || fail "adaptive_hop points differ between -j 1 and -j 2"
grep -q "routing_flow: 4 points, all checks passed" "$work/h1.log" || { cat "$work/h1.log"; fail "adaptive_hop summary"; }
head -1 "$work/j1/points.csv" | grep -qx 'mode,pattern,offered_gbps,messages,accepted_gbps,mean_latency_ns,p50_latency_ns,p99_latency_ns' \
  || fail "points.csv columns: $(head -1 "$work/j1/points.csv")"
[ "$(wc -l < "$work/j1/points.csv")" -eq 9 ] || fail "points.csv: 8 rows expected"
[ "$(wc -l < "$work/j1/saturation.csv")" -eq 5 ] || fail "saturation.csv: 4 rows expected"
for f in latency_uniform throughput_uniform latency_all_to_all throughput_all_to_all; do
  [ -f "$work/j1/$f.gp" ] || fail "no $f.gp"
done
# per pattern and mode: latency at 40 GB/s above latency at 4 GB/s; at
# 4 GB/s accepted within 20 % of offered
awk -F, 'NR > 1 { k = $2 " " $1; if ($3 == 4) { lo[k] = $6; acc[k] = $5 } else hi[k] = $6 }
  END { bad = 0; for (k in lo) { if (!(hi[k] > lo[k])) { print "latency does not rise: " k; bad = 1 }
        if (acc[k] < 3.2 || acc[k] > 4.8) { print "accepted " acc[k] " at 4 GB/s: " k; bad = 1 } }
        exit bad }' "$work/j1/points.csv" || fail "curve shape"
echo "routing_flow ok"
