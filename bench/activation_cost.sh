#!/bin/sh
# activation_cost.sh — median CPU per kernel activation, one or more builds
# side by side (bench/README.md, "Where an activation's CPU goes")
#
#   bench/activation_cost.sh RUNS BUILD_DIR [BUILD_DIR ...] -- [activation_cost.lua params]
#
# Runs bench/lua/activation_cost.lua RUNS times with each build in turn
# (build A, build B, A, B, ...: the host's load moves from minute to
# minute) and prints, per build and case, the activations, the median
# µs of CPU per activation of the collective alone (os.clock: user + sys)
# and the median CPU of the whole process (user + sys, /usr/bin/time),
# which includes building the system, per activation.
set -eu
runs=${1:?usage: bench/activation_cost.sh RUNS BUILD_DIR [BUILD_DIR ...] -- [params]}
shift
builds=
while [ $# -gt 0 ] && [ "$1" != "--" ]; do builds="$builds $1"; shift; done
[ $# -gt 0 ] && shift
[ -n "$builds" ] || { echo "activation_cost.sh: no BUILD_DIR" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
i=0
while [ "$i" -lt "$runs" ]; do
  for b in $builds; do
    # each table row: build, case, activations, run CPU s, whole-process CPU s
    t=$( { /usr/bin/time -f 'cpu %U %S' "$b/kbsim" -q "$here/lua/activation_cost.lua" "$@" \
           > "$out.run"; } 2>&1 ) || { echo "activation_cost.sh: $b failed: $t" >&2; exit 1; }
    whole=$(printf '%s\n' "$t" | awk '/^cpu /{ print $2 + $3 }' | tail -n 1)
    total=$(awk -F'|' '/^\| [a-z]/ && $2 !~ /^ case/ { a += $4 } END { print a }' "$out.run")
    awk -F'|' -v b="$b" -v w="$whole" -v tot="$total" '/^\| [a-z]/ && $2 !~ /^ case/ {
      gsub(/^ +| +$/, "", $2); printf "%s|%s|%d|%s|%s|%s\n", b, $2, $4, $6, w, tot }' "$out.run" >> "$out"
  done
  i=$((i + 1))
done
rm -f "$out.run"
printf '| build | case | activations | run µs/activation (median of %d) | whole process µs/activation, all cases |\n' "$runs"
printf '|---|---|---:|---:|---:|\n'
# median of column 4 (run CPU) over runs, per build and case, keeping first-seen order
awk -F'|' '{
  k = $1 "|" $2
  if (!(k in n)) { order[++m] = k; acts[k] = $3 }
  n[k]++; v[k, n[k]] = $4 * 1e6 / $3; w[k, n[k]] = $5 * 1e6 / $6
}
function median(arr, k, c,   i, j, t, x) {
  for (i = 1; i <= c; i++) x[i] = arr[k, i]
  for (i = 2; i <= c; i++) for (j = i; j > 1 && x[j - 1] > x[j]; j--) { t = x[j]; x[j] = x[j - 1]; x[j - 1] = t }
  return c % 2 ? x[(c + 1) / 2] : (x[c / 2] + x[c / 2 + 1]) / 2
}
END {
  for (i = 1; i <= m; i++) {
    k = order[i]; split(k, p, "|")
    printf "| %s | %s | %d | %.3f | %.3f |\n", p[1], p[2], acts[k], median(v, k, n[k]), median(w, k, n[k])
  }
}' "$out"
