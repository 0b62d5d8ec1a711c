#!/bin/sh
# milestone_gemm.sh KBSIM SRCDIR WORKDIR — the GEMM milestone end to end on a
# reduced sweep: columns and row counts, checks, figures, byte-identical CSV
# with -j 1 and -j 2, --fast reuse, the GEMM stage against kb_gemm's closed
# form, bad arguments.
set -u
kbsim=$1 src=$2 work=$3
script=$src/scenarios/milestone_1h_gemm.lua
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
run() { "$kbsim" -q "$@" "$script" shapes=64,256,32x3072x32 stagings=ref_ref,load_load; }

run -j 1 -o "$work/j1" > "$work/j1.log" 2>&1 || { cat "$work/j1.log"; fail "run with -j 1"; }
run -j 2 -o "$work/j2" > "$work/j2.log" 2>&1 || { cat "$work/j2.log"; fail "run with -j 2"; }
grep -q "all checks passed" "$work/j1.log" || fail "checks did not pass"
for f in gemm.csv engines.csv gemm.json; do
  cmp -s "$work/j1/$f" "$work/j2/$f" || fail "$f differs between -j 1 and -j 2"
done
head -1 "$work/j1/gemm.csv" | grep -q '^shape,staging,M,N,K,tiles,window_ns,gemm_closed_ns,dma_in_busy_ns,fetch_busy_ns,gemm_busy_ns,math_busy_ns,dma_wb_busy_ns,dma_in_occupancy,fetch_occupancy,gemm_occupancy,math_occupancy,dma_wb_occupancy,achieved_tflops,peak_tflops,efficiency,max_rel_err,check$' \
  || fail "gemm.csv columns: $(head -1 "$work/j1/gemm.csv")"
head -1 "$work/j1/engines.csv" | grep -q '^shape,staging,engine,busy_ns,channels,occupancy,window_ns$' \
  || fail "engines.csv columns"
[ "$(wc -l < "$work/j1/gemm.csv")" -eq 7 ] || fail "gemm.csv: 6 rows expected"
[ "$(wc -l < "$work/j1/engines.csv")" -eq 43 ] || fail "engines.csv: 6 x 7 rows expected"
[ "$(grep -c ',passed$' "$work/j1/gemm.csv")" -eq 6 ] || fail "gemm.csv: 6 passed checks expected"
grep -q '^32x3072x32,load_load,32,32,3072,' "$work/j1/gemm.csv" || fail "skinny shape row (M,N,K order)"
# occupancies are shares of the window; efficiency below 1
awk -F, 'NR > 1 { for (i = 14; i <= 18; i++) if ($i < 0 || $i > 1) exit 1; if ($21 <= 0 || $21 > 1) exit 1 }' \
  "$work/j1/gemm.csv" || fail "an occupancy or efficiency outside (0, 1]"
grep -q '"points"' "$work/j1/gemm.json" || fail "gemm.json has the points"
for fig in window occupancy flops; do
  [ -f "$work/j1/$fig.gp" ] || fail "no $fig.gp"
  if command -v gnuplot >/dev/null 2>&1; then
    [ -s "$work/j1/$fig.svg" ] && [ -s "$work/j1/$fig.png" ] || fail "$fig not rendered"
  fi
  grep -q "$fig.gp" "$work/j1/index.md" || fail "index.md lists $fig"
done

# closed form: ref_ref on one square, the GEMM stage busy equals kb_gemm's
# cycles exactly (128^3 in 32x64x32 tiles on 16x16x16 MACs: 4·2·4 tiles of
# 2·4·2 cycles = 512 cycles = 512 ns at 1 GHz)
"$kbsim" -q -j 1 -o "$work/cf" "$script" shapes=128 stagings=ref_ref > "$work/cf.log" 2>&1 \
  || { cat "$work/cf.log"; fail "closed-form run"; }
awk -F, 'NR == 2 { exit !($11 == 512 && $8 == 512) }' "$work/cf/gemm.csv" \
  || fail "GEMM stage busy / closed form: $(sed -n 2p "$work/cf/gemm.csv" | cut -d, -f8,11) (want 512,512)"
grep -q '^128x128x128,ref_ref,pe_gemm,512,1,' "$work/cf/engines.csv" || fail "PE_GEMM engine busy 512 ns"

# --fast: nothing changed, every point comes from the cache; the JSON is rewritten
rm "$work/j1/gemm.json"
"$kbsim" -j 2 -o "$work/j1" --fast "$script" shapes=64,256,32x3072x32 stagings=ref_ref,load_load \
  > "$work/fast.log" 2>&1 || fail "--fast run"
grep -q "reused 6 of 6 points" "$work/fast.log" || { cat "$work/fast.log"; fail "--fast did not reuse the sweep"; }
cmp -s "$work/j1/gemm.json" "$work/j2/gemm.json" || fail "--fast: gemm.json differs"

# bad arguments
"$kbsim" -q -o "$work/bad" "$script" stagings=ref_ref,load_nothing > "$work/bad.log" 2>&1
[ $? -eq 2 ] || fail "an unknown staging must exit 2"
grep -q "milestone_1h_gemm: stagings: 'load_nothing' is not one of ref_ref, load_ref, load_load (nearest: load_load)" "$work/bad.log" || { cat "$work/bad.log"; fail "bad staging message"; }
"$kbsim" -q -o "$work/bad" "$script" shapes=64x0x64 > "$work/bad2.log" 2>&1
[ $? -eq 2 ] || fail "a bad shape must exit 2"
grep -q "shape '64x0x64'" "$work/bad2.log" || { cat "$work/bad2.log"; fail "bad shape message"; }
# every point failing (a TCM too small for any tile): exit 1, the failures
# told (the first with its traceback, the rest in a line), the tables
# written, no figure attempted
"$kbsim" -q -o "$work/allfail" --set pe.tcm.capacity=1KiB "$script" shapes=64,256 \
  stagings=ref_ref > "$work/allfail.log" 2>&1
[ $? -eq 1 ] || { cat "$work/allfail.log"; fail "every point failing must exit 1"; }
grep -q "kb.sweep 'gemm': 2 of 2 points failed" "$work/allfail.log" || { cat "$work/allfail.log"; fail "failure summary"; }
grep -q "TCM scratch is full" "$work/allfail.log" || fail "the failure's cause"
[ "$(grep -c '^stack traceback:' "$work/allfail.log")" -le 2 ] || { cat "$work/allfail.log"; fail "one traceback, not one per point"; }
[ -f "$work/allfail/gemm.csv" ] || fail "the table is still written"
[ ! -f "$work/allfail/window.gp" ] || fail "no figure without a finished point"
echo "milestone_gemm ok"
