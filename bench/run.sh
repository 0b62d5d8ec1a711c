#!/usr/bin/env bash
# run.sh — runs the peer benchmarks W1–W4 N times per peer and prints median events/s as markdown
#
#   bench/run.sh BUILD_DIR [N]      (N defaults to 5; builds nothing)
#
# Peers: kbsim (kbsim-bench), kbsim-lua (kbsim + bench/lua/workloads.lua,
# W1–W3 only) and systemc (kbsim-bench-systemc), each when it was built.
set -euo pipefail

build=${1:?usage: bench/run.sh BUILD_DIR [N]}
n=${2:-5}
here=$(cd "$(dirname "$0")" && pwd)

workloads=("timed 1000 1000" "pingpong 1000 1000" "ring 1000 1000"
           "ring 1000 1000000" "method 1000 1000")

peers=()
[ -x "$build/kbsim-bench" ] && peers+=(kbsim)
[ -x "$build/kbsim" ] && peers+=(kbsim-lua)
[ -x "$build/kbsim-bench-systemc" ] && peers+=(systemc)
if [ ${#peers[@]} -eq 0 ]; then
  echo "run.sh: no benchmark binary in '$build'" >&2
  exit 2
fi

# One run: prints the result line, or nothing if the peer does not do it.
run_one() {
  local peer=$1; shift
  case $peer in
    kbsim) "$build/kbsim-bench" "$@" ;;
    kbsim-lua)
      [ "$1" = method ] && return 0
      "$build/kbsim" "$here/lua/workloads.lua" "$@" ;;
    systemc) "$build/kbsim-bench-systemc" "$@" 2>/dev/null ;;
  esac
}

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# Peers alternate run by run, so that a change in machine load while the
# table is measured hits every peer alike and the ratios stay fair.
declare -A rate wall failed
for w in "${workloads[@]}"; do
  declare -A rates=() walls=()
  for ((i = 0; i < n; i++)); do
    for peer in "${peers[@]}"; do
      [ "${failed[$peer/$w]:-}" ] && continue
      if ! line=$(run_one "$peer" $w); then
        echo "run.sh: $peer $w: self-check failed" >&2
        failed[$peer/$w]=1; continue
      fi
      [ -z "$line" ] && continue
      rates[$peer]+="$(field rate <<<"$line")"$'\n'
      walls[$peer]+="$(field wall_s <<<"$line")"$'\n'
    done
  done
  for peer in "${peers[@]}"; do
    if [ -n "${rates[$peer]:-}" ] && [ -z "${failed[$peer/$w]:-}" ]; then
      rate[$peer/$w]=$(printf '%s' "${rates[$peer]}" | median)
      wall[$peer/$w]=$(printf '%s' "${walls[$peer]}" | median)
    fi
  done
  unset rates walls
done

fmt_rate() { [ -n "${1:-}" ] && awk -v r="$1" 'BEGIN { printf "%.2f M", r / 1e6 }' || printf -- '—'; }

echo "Median events/s over $n runs ($(nproc) cores, $(date +%Y-%m-%d))."
echo
printf '| workload | P | K |'
for peer in "${peers[@]}"; do printf ' %s |' "$peer"; done
printf ' kbsim/systemc |\n|---|---:|---:|'
for peer in "${peers[@]}"; do printf -- '---:|'; done
printf -- '---:|\n'
for w in "${workloads[@]}"; do
  read -r name P K <<<"$w"
  printf '| %s | %s | %s |' "$name" "$P" "$K"
  for peer in "${peers[@]}"; do printf ' %s |' "$(fmt_rate "${rate[$peer/$w]:-}")"; done
  a=${rate[kbsim/$w]:-} b=${rate[systemc/$w]:-}
  if [ -n "$a" ] && [ -n "$b" ]; then
    awk -v a="$a" -v b="$b" 'BEGIN { printf " %.1f× |\n", a / b }'
  else
    printf ' — |\n'
  fi
done

if [ -n "${wall[kbsim/pingpong 1000 1000]:-}" ]; then
  echo
  awk -v w="${wall[kbsim/pingpong 1000 1000]}" \
    'BEGIN { printf "W2 kbsim: %.1f ns per blocking read (wall / events)\n", w / 1e6 * 1e9 }'
fi

echo
echo "Memory: 10,000 thread processes with 64 KiB stacks, all alive at once:"
"$build/kbsim-bench" --rss 10000 64
