#!/bin/sh
# memory.sh — peak RSS of systems built and of lrab runs (bench/README.md)
#
#   bench/memory.sh BUILD_DIR [CASE ...]
#
# A CASE is the arguments of bench/lua/memory.lua, e.g. "build 96" or
# "lrab 6 49152 timing"; the default list builds 6, 96 and 384 SIPs and
# runs lrab on 6 and 24 SIPs, values and timing only. Each row: the case,
# the peak RSS (/usr/bin/time -f %M), the same less an empty run, and per
# unit: a build's per PE; an lrab run's per participant, less the build
# of the same system (so what the run itself costs a participant).
set -eu
build=${1:?usage: bench/memory.sh BUILD_DIR [CASE ...]}
shift
here=$(cd "$(dirname "$0")" && pwd)
script=$here/lua/memory.lua
[ $# -gt 0 ] || set -- "build 6" "build 96" "build 384" "lrab 6 49152" "lrab 6 49152 timing" \
  "lrab 24 49152" "lrab 24 49152 timing"
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# peak KiB of one run of memory.lua; its stdout line goes to $out; a run
# that fails (a wrong value, an error) stops the script
peak() {
  # shellcheck disable=SC2086
  if ! err=$(/usr/bin/time -f 'peak %M' "$build/kbsim" -q "$script" $1 2>&1 >"$out"); then
    echo "memory.sh: '$1' failed: $err" >&2
    exit 1
  fi
  printf '%s\n' "$err" | sed -n 's/^peak //p' | tail -n 1
}

base=$(peak empty)
printf '| case | peak RSS, MiB | less empty, MiB | per PE (build) or participant (lrab, less the build), bytes |\n'
printf '|---|---:|---:|---:|\n'
for c in "$@"; do
  sub=$base
  case $c in lrab*) sub=$(peak "build $(echo "$c" | cut -d' ' -f2)") ;; esac
  kib=$(peak "$c")
  line=$(cat "$out")
  # units: PEs of a build, participants of an lrab run
  n=$(printf '%s\n' "$line" | sed -n 's/.*\(pes\|participants\)=\([0-9]*\).*/\2/p')
  [ -n "$n" ] || { echo "memory.sh: '$c' printed no count: $line" >&2; exit 1; }
  awk -v c="$c" -v k="$kib" -v b="$base" -v s="$sub" -v n="$n" \
    'BEGIN { printf "| %s | %.1f | %.1f | %.0f |\n", c, k / 1024, (k - b) / 1024, (k - s) * 1024 / n }'
done
