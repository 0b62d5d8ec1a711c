#!/bin/sh
# calibrate.sh KBSIM SRCDIR WORKDIR CASE — scenarios/calibrate.lua through the binary
# (docs/calibrate.md). Each CASE prints "CASE ok".
set -u
kbsim=$1 src=$2 work=$3 case=$4
cases=$src/tests/cli/cases
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
fail() { echo "FAIL ($case): $*"; [ -f log ] && cat log; exit 1; }
# within(GOT, WANT, REL): |GOT - WANT| <= REL * |WANT|
within() { awk -v g="$1" -v w="$2" -v r="$3" 'BEGIN { d = g - w; if (d < 0) d = -d;
  a = w < 0 ? -w : w; exit !(d <= r * a) }'; }

case $case in
csv)
  # measurements simulated at 11 ns / 100 GB/s: the fit from 8 / 128 finds them
  "$kbsim" -q -j 2 -o out "$src/scenarios/calibrate.lua" \
    measured="$cases/calibrate_measured.csv" > log 2>&1 || fail "exit $?"
  grep -q "calibrate: fitted 2 settings to 3 points" log || fail "no summary line"
  grep -q "MAPE 10.55% -> 0.00%" log || fail "MAPE before/after"
  [ -f out/calibrated.yaml ] || fail "no overlay"
  # the overlay is a topology.yaml kbsim reads back
  "$kbsim" --topology out/calibrated.yaml "$cases/calibrate_overlay.lua" > got 2>&1 ||
    fail "overlay not read: $(cat got)"
  set -- $(cat got)
  within "$2" 11 0.01 || fail "port_overhead_ns $2, want 11 within 1%"
  within "$4" 100 0.01 || fail "gbps_per_connection $4, want 100 within 1%"
  # the fitted values in fit.csv are the overlay's
  grep -q "^ucie.port_overhead_ns,fitted,8,11.0" out/fit.csv || fail "fit.csv: $(cat out/fit.csv)"
  ;;
truth)
  # the recovery example: measurements simulated at perturbed values, then found again
  "$kbsim" -q -j 2 -o out "$src/scenarios/calibrate.lua" \
    truth=ucie.port_overhead_ns:5.5,cube.noc.bandwidth_gbps:160 \
    fit=ucie.port_overhead_ns,cube.noc.bandwidth_gbps sizes=2048,16384,131072 > log 2>&1 ||
    fail "exit $?"
  grep -q "truth recovered within 1%" log || fail "not recovered"
  ;;
refused)
  # half the default system's time: the port overhead would have to be negative
  "$kbsim" -q -j 2 -o out "$src/scenarios/calibrate.lua" \
    measured="$cases/calibrate_refused.csv" fit=ucie.port_overhead_ns > log 2>&1
  [ $? -eq 1 ] || fail "exit status, want 1"
  grep -q "calibrate: refused: the fit needs ucie.port_overhead_ns below its physical range (at least 0)" log ||
    fail "no explanation"
  grep -q "not fitted within 10%" log || fail "unfitted points not named"
  [ ! -f out/calibrated.yaml ] || fail "a refused fit wrote an overlay"
  grep -q "^ucie.port_overhead_ns,refused," out/fit.csv || fail "fit.csv status"
  ;;
*) fail "unknown case" ;;
esac
echo "$case ok"
