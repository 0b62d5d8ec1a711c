#!/bin/sh
# topology.sh KBSIM SRCDIR WORKDIR — every scenario honours --topology or
# refuses it with a one-line reason and exit 2. Honoured: a grid file that
# slows the NoC and the TCM gives the same results as the same keys given
# by --set, and other results than the defaults. A graph file is run by the
# scenarios whose systems can be graphs and refused by the others.
set -u
kbsim=$1 src=$2 work=$3
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work" || fail "cannot make $work"
cd "$src" || fail "no $src"
printf 'cube:\n  noc:\n    bandwidth_gbps: 16\n    router_overhead_ns: 5\npe:\n  tcm:\n    bandwidth_gbps: 64\n' \
  > "$work/slow.yaml"
SET="--set cube.noc.bandwidth_gbps=16 --set cube.noc.router_overhead_ns=5 --set pe.tcm.bandwidth_gbps=64"
graph=tests/cli/cases/graph4.yaml

# honoured(NAME RESULT-FILE SCENARIO PARAMS...): RESULT-FILE of the run with
# --topology equals the one with --set and differs from the default run's
honoured() {
  name=$1 file=$2; shift 2
  for mode in default topology set; do
    case $mode in
      default) opts="" ;;
      topology) opts="--topology $work/slow.yaml" ;;
      set) opts="$SET" ;;
    esac
    # shellcheck disable=SC2086
    "$kbsim" -q -j 2 $opts -o "$work/$name.$mode" "$@" > "$work/$name.$mode.log" 2>&1 \
      || { cat "$work/$name.$mode.log"; fail "$name with $mode"; }
  done
  r() { if [ "$file" = stdout ]; then grep -v "bytes a copy" "$work/$name.$1.log"; else cat "$work/$name.$1/$file"; fi; }
  [ -n "$(r topology)" ] || fail "$name: no results"
  [ "$(r topology)" = "$(r set)" ] || fail "$name: --topology and --set of the same keys differ"
  [ "$(r topology)" != "$(r default)" ] || fail "$name: --topology changed nothing"
}
honoured milestone summary.csv scenarios/milestone_1h_ccl.lua sizes=8,4096 buffer_sizes=128 matrix=no
honoured gemm gemm.csv scenarios/milestone_1h_gemm.lua shapes=64 stagings=load_load
honoured comms comms_bench.csv scenarios/comms_bench.lua collectives=all_reduce min=64 max=1KiB
honoured tp_mlp breakdown.csv scenarios/tp_mlp.lua in=64 hidden=128 out=32 tokens=4
honoured probe stdout scenarios/probe.lua bytes=4096
honoured tutorial_collective stdout scenarios/tutorial_collective.lua
grep -q "bytes a copy (topology $work/slow.yaml)" "$work/probe.topology.log" || fail "probe names the topology"

# refused(SCENARIO TOPOLOGY MESSAGE): exit 2 and one line that says why
refused() {
  "$kbsim" -q -o "$work/refused" --topology "$2" "$1" > "$work/refused.log" 2>&1
  [ $? -eq 2 ] || { cat "$work/refused.log"; fail "$1 with --topology $2 must exit 2"; }
  [ "$(wc -l < "$work/refused.log")" -eq 1 ] || { cat "$work/refused.log"; fail "$1: one line"; }
  grep -qF "$3" "$work/refused.log" || { cat "$work/refused.log"; fail "$1: message"; }
}
refused scenarios/milestone_1h_ccl.lua $graph "milestone_1h_ccl: --topology $graph is a graph: every point sets its own SIP grid"
refused scenarios/milestone_1h_gemm.lua $graph "milestone_1h_gemm: --topology $graph is a graph: the operands are staged from the PE's HBM"
refused scenarios/probe.lua $graph "probe: --topology $graph is a graph: the probe's cases name SIPs, cubes and PEs"
printf 'sip:\n  cube_mesh: {w: 2, h: 2}\n' > "$work/small.yaml"
refused scenarios/probe.lua "$work/small.yaml" "probe: the cases need 2 or more SIPs of 16 cubes (4x4) with 8 or more PEs each; this system has 2 SIPs of 4 cubes with 8 PEs"
refused scenarios/tutorial_collective.lua $graph "tutorial_collective: --topology $graph is a graph"
refused scenarios/hello.lua "$work/slow.yaml" "hello: --topology $work/slow.yaml is not used: hello builds no system"
refused scenarios/tutorial_topology.lua "$work/slow.yaml" "tutorial_topology: --topology $work/slow.yaml is not used: the tutorial describes its own graph"

# a graph runs where the systems may be graphs
"$kbsim" -q -o "$work/tp_graph" --topology $graph scenarios/tp_mlp.lua in=64 hidden=128 out=32 tokens=4 \
  > "$work/tp_graph.log" 2>&1 || { cat "$work/tp_graph.log"; fail "tp_mlp on a graph"; }
grep -q "tp_mlp: 1 points, all checks passed" "$work/tp_graph.log" || { cat "$work/tp_graph.log"; fail "tp_mlp graph summary"; }
"$kbsim" -q -o "$work/comms_graph" --topology $graph scenarios/comms_bench.lua collectives=all_reduce \
  min=64 max=256 ws=4 > "$work/comms_graph.log" 2>&1 || { cat "$work/comms_graph.log"; fail "comms_bench on a graph"; }
grep -q "simulated: 3 rows, 1 collectives, all checks passed" "$work/comms_graph.log" \
  || { cat "$work/comms_graph.log"; fail "comms_bench graph summary"; }
echo "topology ok"
