#!/usr/bin/env bash
# w2_scan.sh — W2 (pingpong) ns per blocking read against the number of
# processes, C and Lua processes run alternately, medians as markdown
#
#   bench/w2_scan.sh BUILD_DIR [N]      (N runs per point, default 5)
#
# 10^6 reads per C point and 4·10^5 per Lua point, at P = 2, 10, 100, 1000.
set -euo pipefail

build=${1:?usage: bench/w2_scan.sh BUILD_DIR [N]}
n=${2:-5}
here=$(cd "$(dirname "$0")" && pwd)
for f in "$build/kbsim-bench" "$build/kbsim"; do
  [ -x "$f" ] || { echo "w2_scan.sh: no $f" >&2; exit 2; }
done

wall() { sed -n 's/.* wall_s=\([^ ]*\).*/\1/p'; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

declare -A c l
for ((i = 0; i < n; i++)); do
  for P in 2 10 100 1000; do
    w=$("$build/kbsim-bench" pingpong $P $((1000000 / P)) | wall)
    c[$P]+="$(awk -v w="$w" 'BEGIN { print w * 1e3 }')"$'\n'
    w=$("$build/kbsim" "$here/lua/workloads.lua" pingpong $P $((400000 / P)) | wall)
    l[$P]+="$(awk -v w="$w" 'BEGIN { print w * 2.5e3 }')"$'\n'
  done
done

echo "| P | C ns/read | Lua ns/read | Lua/C |"
echo "|---:|---:|---:|---:|"
for P in 2 10 100 1000; do
  a=$(printf '%s' "${c[$P]}" | median) b=$(printf '%s' "${l[$P]}" | median)
  awk -v P=$P -v a="$a" -v b="$b" 'BEGIN { printf "| %d | %.1f | %.1f | %.1f× |\n", P, a, b, b / a }'
done
