#!/usr/bin/env bash
# mpi_sweep.sh — kb.sweep across MPI ranks: speed-up and dispatch cost
#
#   bench/mpi_sweep.sh BUILD_DIR [N] [SCRIPT [key=value ...]]
#
# Runs SCRIPT (default scenarios/milestone_1h_ccl.lua) N times (default 3)
# each as `kbsim -j 1`, `mpirun -n 1 kbsim -j 1` and `mpirun -n 2 kbsim -j 1`,
# interleaved, and prints the medians of wall time and CPU time (user+sys
# of mpirun and its ranks, and of each rank alone: rank 0's includes the
# gnuplot processes it starts). Then the MPI dispatch cost per point: a sweep
# of 2000 empty points (tests/cli/cases/mpi_slow.lua ms=0) under
# `mpirun -n 2` against `-j 1`, CPU time per point, the 1-point run's
# start-up cost taken off both; and the wall time of an MPI run of an
# empty script (start-up and exit). Needs a build with MPI (KBSIM_MPI).
set -euo pipefail
build=${1:?usage: bench/mpi_sweep.sh BUILD_DIR [N] [SCRIPT [key=value ...]]}
n=${2:-3}
here=$(cd "$(dirname "$0")/.." && pwd)
shift $(($# < 2 ? $# : 2))
script=${1:-$here/scenarios/milestone_1h_ccl.lua}
[ $# -gt 0 ] && shift
kbsim=$(cd "$build" && pwd)/kbsim
read -ra mpirun <<< "${MPIRUN:-mpirun}" # may hold options, e.g. "mpirun --bind-to none"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# each rank timed alone: its CPU to $work/rank.R
cat > "$work/rank.sh" <<EOF
#!/bin/sh
exec /usr/bin/time -f "%U %S" -o "$work/rank.\${OMPI_COMM_WORLD_RANK:-\${PMIX_RANK:-0}}" "\$@"
EOF
chmod +x "$work/rank.sh"

# one timed run: appends "wall cpu cpu_rank0 cpu_rank1" to $work/$1
timed() {
  local tag=$1; shift
  rm -rf "$work/out" "$work"/rank.[0-9]*
  /usr/bin/time -f "%e %U %S" -o "$work/t" "$@" > /dev/null 2> "$work/err" ||
    { cat "$work/err" >&2; exit 1; }
  local r0=- r1=-
  [ -f "$work/rank.0" ] && r0=$(awk '{ printf "%.3f", $1 + $2 }' "$work/rank.0")
  [ -f "$work/rank.1" ] && r1=$(awk '{ printf "%.3f", $1 + $2 }' "$work/rank.1")
  awk -v r0="$r0" -v r1="$r1" '{ printf "%.3f %.3f %s %s\n", $1, $2 + $3, r0, r1 }' "$work/t" >> "$work/$tag"
}
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
col() { cut -d' ' -f"$2" "$work/$1" | median; }

echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
for _ in $(seq "$n"); do
  timed j1 "$kbsim" -q -j 1 -o "$work/out" "$script" "$@"
  timed n1 "${mpirun[@]}" --allow-run-as-root --oversubscribe -n 1 "$work/rank.sh" "$kbsim" -q -j 1 -o "$work/out" "$script" "$@"
  timed n2 "${mpirun[@]}" --allow-run-as-root --oversubscribe -n 2 "$work/rank.sh" "$kbsim" -q -j 1 -o "$work/out" "$script" "$@"
done
echo "$(basename "$script") $*: medians of $n runs"
echo "| run | wall s | CPU s (user+sys) | CPU rank 0 | CPU rank 1 | wall speed-up vs mpirun -n 1 |"
echo "|---|---|---|---|---|---|"
base=$(col n1 1)
for t in j1 n1 n2; do
  case $t in j1) name="kbsim -j 1" ;; n1) name="mpirun -n 1 kbsim -j 1" ;; n2) name="mpirun -n 2 kbsim -j 1" ;; esac
  w=$(col $t 1)
  r0=-; r1=-
  [ $t != j1 ] && r0=$(col $t 3)
  [ $t = n2 ] && r1=$(col $t 4)
  echo "| $name | $w | $(col $t 2) | $r0 | $r1 | $(awk -v b="$base" -v w="$w" 'BEGIN { printf "%.2f", b / w }') |"
done

# each iteration's n1 and n2 ran back to back: their ratio, run by run, and
# the load they ran under (on a shared machine the medians hide the spread)
echo "per run, wall speed-up -n 2 vs -n 1: $(paste -d' ' "$work/n1" "$work/n2" |
  awk '{ printf "%s%.2f", (NR > 1 ? " " : ""), $1 / $5 }')"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"

# the fixed cost of an MPI run: launcher, MPI_Init, MPI_Finalize and the
# launcher's exit, for a script that only loads kbsim (decision 0046)
echo 'require("kbsim")' > "$work/empty.lua"
rm -f "$work/e1" "$work/e2"
for _ in $(seq "$n"); do
  timed e1 "${mpirun[@]}" --allow-run-as-root --oversubscribe -n 1 "$kbsim" -q -o "$work/out" "$work/empty.lua"
  timed e2 "${mpirun[@]}" --allow-run-as-root --oversubscribe -n 2 "$kbsim" -q -o "$work/out" "$work/empty.lua"
done
echo "empty script, wall: mpirun -n 1 $(col e1 1) s, mpirun -n 2 $(col e2 1) s"

# dispatch cost: CPU per point, MPI against one process
slow=$here/tests/cli/cases/mpi_slow.lua
rm -f "$work"/p*
for _ in $(seq "$n"); do
  timed p1a "$kbsim" -q -j 1 -o "$work/out" "$slow" n=1 ms=0
  timed p1b "$kbsim" -q -j 1 -o "$work/out" "$slow" n=2000 ms=0
  timed p2a "${mpirun[@]}" --allow-run-as-root --oversubscribe -n 2 "$kbsim" -q -j 1 -o "$work/out" "$slow" n=1 ms=0
  timed p2b "${mpirun[@]}" --allow-run-as-root --oversubscribe -n 2 "$kbsim" -q -j 1 -o "$work/out" "$slow" n=2000 ms=0
done
awk -v a="$(col p1a 2)" -v b="$(col p1b 2)" -v c="$(col p2a 2)" -v d="$(col p2b 2)" 'BEGIN {
  one = (b - a) / 1999 * 1000; two = (d - c) / 1999 * 1000
  printf "per point, CPU: -j 1 %.3f ms, mpirun -n 2 %.3f ms: MPI dispatch costs %.3f ms per point\n",
         one, two, two - one }'
