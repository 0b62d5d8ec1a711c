#!/bin/sh
# out_dir_quotes.sh KBSIM SRCDIR WORKDIR — an output folder whose name holds
# a space, a single and a double quote: the scenarios that draw their own
# figures (milestone_1h_gemm's bars, milestone_1h_ccl's topology) and
# results.figure render into it, or say gnuplot is missing
set -u
kbsim=$1 src=$2 work=$3
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work" || fail "cannot make $work"
out="$work/it's a \"dir\""
"$kbsim" -q -o "$out/gemm" "$src/scenarios/milestone_1h_gemm.lua" shapes=64x64x64 > "$work/gemm.log" 2>&1 \
  || { cat "$work/gemm.log"; fail "milestone_1h_gemm into a quoted folder"; }
"$kbsim" -q -o "$out/ccl" "$src/scenarios/milestone_1h_ccl.lua" sizes=8 buffer_sizes=128 matrix=no \
  > "$work/ccl.log" 2>&1 || { cat "$work/ccl.log"; fail "milestone_1h_ccl into a quoted folder"; }
if command -v gnuplot > /dev/null 2>&1; then
  for f in gemm/window gemm/occupancy gemm/flops ccl/topology ccl/buffer_kind; do
    [ -s "$out/$f.svg" ] || fail "$f.svg not rendered"
  done
else
  grep -q "gnuplot was not on PATH" "$out/gemm/index.md" || fail "no note that gnuplot is missing"
fi
echo "out_dir_quotes ok"
