#!/bin/sh
# run_case.sh — runs the kbsim CLI once and checks its exit status and output
# usage: run_case.sh EXPECTED_STATUS NPATTERNS PATTERN... -- COMMAND [ARGS...]
# Each PATTERN must occur (as a fixed string) in stdout+stderr.
want=$1; n=$2; shift 2
i=0; pats=""
while [ "$i" -lt "$n" ]; do
  pats="$pats$1
"
  shift; i=$((i + 1))
done
[ "$1" = "--" ] || { echo "run_case.sh: expected '--' before the command" >&2; exit 2; }
shift
out=$("$@" 2>&1); got=$?
fail=0
if [ "$got" -ne "$want" ]; then
  echo "exit status $got, want $want"; fail=1
fi
printf '%s' "$pats" | while IFS= read -r p; do
  printf '%s\n' "$out" | grep -qF -- "$p" || { echo "missing in output: '$p'"; exit 1; }
done || fail=1
if [ "$fail" -ne 0 ]; then
  echo "---- output of: $*"; printf '%s\n' "$out"; exit 1
fi
exit 0
