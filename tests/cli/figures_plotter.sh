#!/bin/sh
# figures_plotter.sh KBSIM SRCDIR WORKDIR — one gnuplot draws the renders
# one after the other (lua/lrender.c, decision 0046), through kbsim:
# - every render starts from gnuplot's initial settings (`reset session`);
# - a render that quits after its files is drawn, one with an error or
#   whose gnuplot is killed fails naming its figure, and every later
#   render is still drawn (a new gnuplot takes over);
# - no temporary file is left after kbsim exits.
set -u
kbsim=$1 src=$2 work=$3
fail() { echo "FAIL: $*"; exit 1; }
command -v gnuplot > /dev/null 2>&1 || { echo "gnuplot not installed: figures_plotter ok (skipped)"; exit 0; }
rm -rf "$work" && mkdir -p "$work/out" || fail "cannot make $work"
"$kbsim" -q "$src/tests/cli/cases/figures_plotter.lua" "$work/out" > "$work/log" 2>&1
rc=$?
[ $rc -eq 2 ] || { cat "$work/log"; fail "exit $rc, want 2"; }
grep -q "^kbsim: figure 'bad': gnuplot failed on '$work/out/bad.gp': \"bad.gp\" line 2: undefined function: nosuchfunction$" "$work/log" \
  || { cat "$work/log"; fail "the failed figure's message"; }
grep -q "^kbsim: figure 'killed': gnuplot failed on '$work/out/killed.gp': killed by signal 9$" "$work/log" \
  || { cat "$work/log"; fail "the killed gnuplot's message"; }
[ "$(grep -c "^kbsim: figure" "$work/log")" -eq 2 ] || { cat "$work/log"; fail "other failures"; }
for n in first fresh quits last; do
  [ -s "$work/out/$n.svg" ] && [ -s "$work/out/$n.png" ] || fail "$n not drawn"
  (cd "$work/out" && gnuplot -e "out='fg'" "$n.gp") || fail "gnuplot on $n.gp"
  for ext in svg png; do
    cmp -s "$work/out/$n.$ext" "$work/out/fg.$ext" || fail "$n.$ext differs from gnuplot on its own"
  done
done
grep -q "LEAKED" "$work/out/fresh.svg" && fail "fresh.svg: a variable of the figure before it was left"
for n in bad killed; do
  [ ! -e "$work/out/$n.svg" ] && [ ! -e "$work/out/$n.png" ] || fail "$n has an SVG or PNG"
done
rm -f "$work/out/fg.svg" "$work/out/fg.png"
ls "$work/out" | grep -q tmp && fail "temporary files left: $(ls "$work/out")"
echo "figures_plotter ok"
