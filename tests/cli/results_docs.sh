#!/bin/sh
# results_docs.sh KBSIM SRCDIR WORKDIR — the example at the top of
# docs/results.md, verbatim, through kbsim: with gnuplot (if installed) it
# renders; with a PATH that has no gnuplot it says gnuplot is missing,
# exits 0 and still writes the CSV and a complete .gp script.
set -u
kbsim=$1 src=$2 work=$3
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work/nogp" || fail "cannot make $work"
# the first indented block of docs/results.md, without its indentation
awk '/^    /{p=1; print substr($0, 5); next} p&&/^$/{print; next} p{exit}' "$src/docs/results.md" \
  > "$work/example.lua"
grep -q "results.figure" "$work/example.lua" || fail "no results.figure in the docs example"
cd "$work" || fail "cd $work"

if command -v gnuplot > /dev/null 2>&1; then
  "$kbsim" -q -o "$work/with" example.lua > with.log 2>&1 || { cat with.log; fail "the example with gnuplot"; }
  [ -s "$work/with/latency.svg" ] && [ -s "$work/with/latency.png" ] || fail "not rendered"
fi

# no gnuplot on PATH (kbsim runs its shell commands through /bin/sh)
PATH="$work/nogp" "$kbsim" -q -o "$work/without" example.lua > without.log 2>&1
rc=$?
[ $rc -eq 0 ] || { cat without.log; fail "without gnuplot: exit $rc, want 0"; }
grep -q "gnuplot is not on PATH: figures are written as .gp scripts and CSV, not rendered" without.log \
  || { cat without.log; fail "no word that gnuplot is missing"; }
[ "$(grep -c "gnuplot is not on PATH" without.log)" -eq 1 ] || fail "said more than once"
[ "$(wc -l < "$work/without/latency.csv")" -eq 4 ] || fail "latency.csv: 3 rows expected"
[ ! -f "$work/without/latency.svg" ] || fail "an SVG without gnuplot"
grep -q "^plot \$s1 using 1:2" "$work/without/latency.gp" || fail "latency.gp has no plot"
[ "$(tail -1 "$work/without/latency.gp")" = "set output" ] || fail "latency.gp is cut short"
grep -q "gnuplot was not on PATH" "$work/without/index.md" || fail "index.md says it was not rendered"
# the script draws on its own where gnuplot is
if command -v gnuplot > /dev/null 2>&1; then
  (cd "$work/without" && gnuplot latency.gp) || fail "gnuplot on the written latency.gp"
  [ -s "$work/without/latency.svg" ] || fail "latency.gp drew nothing"
fi
echo "results_docs ok"
