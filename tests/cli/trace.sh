#!/bin/sh
# trace.sh KBSIM SRCDIR WORKDIR — --trace end to end: a ring all-reduce's
# trace has the expected shape (checked by kbsim itself, trace_check.lua),
# its IPCQ messages each a send and a recv span that pair up, each
# receiving ring's occupancy counter agreeing with them slot by slot (also
# on small rings, where a message takes 4 slots), only the
# first simulation records, two runs give byte-identical files, a sweep
# traces one point (--trace-point, also with -j 2), bad input.
set -u
kbsim=$1 src=$2 work=$3
cases=$src/tests/cli/cases
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
check() { "$kbsim" "$cases/trace_check.lua" "$@" > "$work/check.log" 2>&1 || { cat "$work/check.log"; fail "trace_check $*"; }; }

"$kbsim" -q --trace "$work/a.json" "$cases/trace_allreduce.lua" > "$work/a.log" 2>&1 || { cat "$work/a.log"; fail "traced run"; }
"$kbsim" -q --trace="$work/b.json" "$cases/trace_allreduce.lua" > "$work/b.log" 2>&1 || { cat "$work/b.log"; fail "second traced run"; }
# 64 f32 per rank: 256 bytes a rank; IPCQ messages: the ring's 3 rounds
# of 4 sends (12), the tree's 3 edges up and down (6); rings of 4 slots
check "$work/a.json" ring_allreduce 4 256 12 4
cmp -s "$work/a.json" "$work/b.json" || fail "two runs give different traces"
grep -q tree_allreduce "$work/a.json" && fail "the second simulation was traced"
# the same numbers with and without a trace
"$kbsim" -q "$cases/trace_allreduce.lua" > "$work/plain.log" 2>&1 || fail "untraced run"
cmp -s "$work/a.log" "$work/plain.log" || fail "tracing changed the results"
# --trace-point 2: the second simulation, the tree all-reduce
"$kbsim" -q --trace "$work/t2.json" --trace-point 2 "$cases/trace_allreduce.lua" > /dev/null 2>&1 \
  || fail "--trace-point 2"
check "$work/t2.json" tree_allreduce 4 256 6 4
# rings of 2 slots of 64 bytes: a 256-byte message is 4 slots (48 in all
# on the 4 channels), so the counters go up 48 times and down 48 times
"$kbsim" -q --trace "$work/small.json" "$cases/trace_allreduce.lua" small > /dev/null 2>&1 \
  || fail "traced run on small rings"
check "$work/small.json" ring_allreduce 4 256 12 2
grep -q "ipcq occupancy: 4 counters, peak [12] of 2 slots" "$work/check.log" || { cat "$work/check.log"; fail "occupancy counters on small rings"; }
[ "$(grep -c '"ph":"C".*"value":' "$work/small.json")" -eq 96 ] || fail "96 occupancy samples on small rings"
grep -q '"ph":"C","pid":1,"tid":[0-9]*,"ts":[0-9.]*,"name":"cube0.pe1.ipcq.W.slots","args":{"value":1}}' "$work/small.json" \
  || fail "a counter named cube0.pe1.ipcq.W.slots in sip0"

# a sweep: point 2 only (32 f32 per rank: 128 bytes; 64 and 256 in the others)
"$kbsim" -q -j 1 --trace "$work/s1.json" --trace-point 2 "$cases/trace_allreduce.lua" sweep \
  > "$work/s1.log" 2>&1 || { cat "$work/s1.log"; fail "traced sweep -j 1"; }
"$kbsim" -q -j 2 --trace "$work/s2.json" --trace-point 2 "$cases/trace_allreduce.lua" sweep \
  > "$work/s2.log" 2>&1 || { cat "$work/s2.log"; fail "traced sweep -j 2"; }
check "$work/s1.json" ring_allreduce 4 128 12 4
grep -q -e '"bytes":64,' -e '"bytes":256,' "$work/s1.json" && fail "other sweep points in the trace"
cmp -s "$work/s1.json" "$work/s2.json" || fail "sweep traces differ between -j 1 and -j 2"
"$kbsim" -q -j 2 --trace "$work/s3.json" "$cases/trace_allreduce.lua" sweep > /dev/null 2>&1 \
  || fail "traced sweep, first point"
check "$work/s3.json" ring_allreduce 4 64 12 4

# bad input
out=$("$kbsim" -q --trace "$work/x.json" --trace-point 9 "$cases/trace_allreduce.lua" sweep 2>&1)
[ $? -eq 2 ] || fail "--trace-point beyond the sweep: exit 2 expected"
echo "$out" | grep -q "kb.sweep 'trace': --trace-point 9 but the sweep has 3 points" || { echo "$out"; fail "message for --trace-point 9"; }
out=$("$kbsim" -q --trace "$work/no/such/dir.json" "$cases/trace_allreduce.lua" 2>&1)
[ $? -eq 2 ] || fail "unwritable trace: exit 2 expected"
# (checked before the script runs: decision 0061)
echo "$out" | grep -q "^kbsim: --trace: cannot write $work/no/such/dir.json: $work/no/such: No such file or directory" || { echo "$out"; fail "message for an unwritable trace"; }
out=$("$kbsim" --trace-point 0 x.lua 2>&1)
[ $? -eq 2 ] && echo "$out" | grep -q "bad value '0' for '--trace-point'" || { echo "$out"; fail "--trace-point 0"; }
# a helper simulation made before the sweep (comms_bench's path queries,
# kb.sim{trace = false}) does not take the trace from the first point
"$kbsim" -q -j 2 --trace "$work/cb.json" -o "$work/cb" "$src/scenarios/comms_bench.lua" \
  collectives=all_reduce max=64 > "$work/cb.log" 2>&1 || { cat "$work/cb.log"; fail "comms_bench --trace"; }
grep -q '"cat":"kernel"' "$work/cb.json" || fail "comms_bench's trace holds no kernel span"
out=$("$kbsim" --trace-point 2 "$cases/trace_allreduce.lua" 2>&1)
[ $? -eq 2 ] && echo "$out" | grep -q "kbsim: --trace-point needs --trace FILE" \
  || { echo "$out"; fail "--trace-point without --trace"; }
out=$("$kbsim" --trace "$work/none.json" "$cases/hello_notrace.lua" 2>&1)
echo "$out" | grep -q "kbsim: no trace written to '$work/none.json': the script created no simulation" \
  || { echo "$out"; fail "note when nothing was traced"; }
echo "trace ok"
