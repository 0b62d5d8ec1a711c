#!/bin/sh
# figures_background.sh KBSIM SRCDIR WORKDIR — results.figure draws in the
# background (lua/lrender.h) through kbsim:
# - results.figure returns before gnuplot ends: a gnuplot that waits until
#   the script has started every figure still draws them all, and kbsim
#   waits for it before it exits;
# - the SVG and PNG are byte for byte what gnuplot draws from the same
#   .gp in the foreground, and the same from run to run;
# - a figure gnuplot fails to draw fails the run (exit 2) naming it, after
#   every other figure is drawn, leaving no temporary file;
# - results.wait_figures waits, and raises the failure naming the figure.
set -u
kbsim=$1 src=$2 work=$3
fail() { echo "FAIL: $*"; exit 1; }
command -v gnuplot > /dev/null 2>&1 || { echo "gnuplot not installed: figures_background ok (skipped)"; exit 0; }
real=$(command -v gnuplot)
rm -rf "$work" && mkdir -p "$work/bin" || fail "cannot make $work"
case_lua=$src/tests/cli/cases/figures_background.lua
names="latency loglog ref points"

# a gnuplot that waits (at most 30 s) for the file the script makes after
# its first results.figure returned: were results.figure to wait for
# gnuplot, the script would never make it and the figures would fail
cat > "$work/bin/gnuplot" <<EOS
#!/bin/sh
i=0
while [ ! -f "$work/go" ] && [ \$i -lt 300 ]; do sleep 0.1; i=\$((i + 1)); done
[ -f "$work/go" ] || { echo "gnuplot started before results.figure returned"; exit 1; }
exec "$real" "\$@"
EOS
chmod +x "$work/bin/gnuplot"
cd "$work" || fail "cd $work"
PATH="$work/bin:$PATH" "$kbsim" -q -o "$work/slow" "$case_lua" go="$work/go" > slow.log 2>&1
rc=$?
[ $rc -eq 0 ] || { cat slow.log; fail "slow gnuplot: exit $rc"; }
for n in $names; do
  [ -s "$work/slow/$n.svg" ] && [ -s "$work/slow/$n.png" ] || { cat slow.log; fail "slow: $n not drawn before exit"; }
done
ls "$work/slow" | grep -q tmp && fail "slow: temporary files left: $(ls "$work/slow")"

# the same bytes as gnuplot in the foreground, and run to run
"$kbsim" -q -o "$work/a" "$case_lua" > a.log 2>&1 || { cat a.log; fail "run a"; }
"$kbsim" -q -j 2 -o "$work/b" "$case_lua" > b.log 2>&1 || { cat b.log; fail "run b"; }
for n in $names; do
  (cd "$work/a" && gnuplot -e "out='fg'" "$n.gp") || fail "gnuplot on $n.gp"
  for ext in svg png; do
    cmp -s "$work/a/$n.$ext" "$work/a/fg.$ext" || fail "$n.$ext differs from gnuplot in the foreground"
    cmp -s "$work/a/$n.$ext" "$work/b/$n.$ext" || fail "$n.$ext differs between two runs"
    cmp -s "$work/a/$n.$ext" "$work/slow/$n.$ext" || fail "$n.$ext differs with a slow gnuplot"
  done
done
# the second `latency` (same files) replaced the first, in order
grep -q "latency again" "$work/a/latency.svg" || fail "latency.svg is not the second figure of that name"

# a figure gnuplot cannot draw
"$kbsim" -q -o "$work/bad" "$case_lua" broken=1 > bad.log 2>&1
rc=$?
[ $rc -eq 2 ] || { cat bad.log; fail "broken figure: exit $rc, want 2"; }
grep -q "^kbsim: figure 'broken': gnuplot failed on '$work/bad/broken.gp': .*nosuchfunction" bad.log \
  || { cat bad.log; fail "no message naming the figure and gnuplot's error"; }
[ "$(grep -c "^kbsim: figure" bad.log)" -eq 1 ] || { cat bad.log; fail "reported other than once"; }
grep -q "figures started: 6" bad.log || fail "the script did not go on after the broken figure"
[ ! -e "$work/bad/broken.svg" ] && [ ! -e "$work/bad/broken.png" ] || fail "broken figure has an SVG or PNG"
for n in $names; do
  cmp -s "$work/a/$n.svg" "$work/bad/$n.svg" || fail "bad run: $n.svg not drawn"
done
ls "$work/bad" | grep -q tmp && fail "bad run: temporary files left: $(ls "$work/bad")"

# results.wait_figures: raises the failure at the script's line
"$kbsim" -q -o "$work/wait" "$case_lua" broken=1 wait=1 > wait.log 2>&1
rc=$?
[ $rc -eq 2 ] || { cat wait.log; fail "wait_figures: exit $rc, want 2"; }
grep -q "figures_background.lua:[0-9]*: results.wait_figures: figure 'broken': gnuplot failed" wait.log \
  || { cat wait.log; fail "wait_figures: no error naming the figure"; }
grep -q "^kbsim: figure 'broken'" wait.log && { cat wait.log; fail "wait_figures: reported twice"; }
"$kbsim" -q -o "$work/waitok" "$case_lua" wait=1 > waitok.log 2>&1 || { cat waitok.log; fail "wait_figures without failure"; }
grep -q "figures started: 5" waitok.log || fail "wait_figures run"
echo "figures_background ok"
