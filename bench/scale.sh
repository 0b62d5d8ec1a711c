#!/usr/bin/env bash
# scale.sh — CPU, peak RSS, kernel activations and simulated time of
# collectives at system scale, and the pure α-β ring all-reduce beside its
# SimGrid peer (bench/README.md, "Scale")
#
#   bench/scale.sh BUILD_DIR [--quick | --full] [--reps R] [--no-ab] [CASE ...]
#
# Table 1: lrab and the flat ring (bench/lua/scale_allreduce.lua) on
# torus_2d systems, values written and checked. Default: 6, 24 and 96 SIPs
# at n_elem 1024 and 49152, except the flat ring on 96 SIPs at 49152 (tens
# of minutes); --full adds it and 384 and 1024 SIPs (hours and up to ~12
# GB); --quick runs 6 SIPs at n_elem 1024 only. A CASE given on the command
# line replaces the list: "lrab 96 49152", "ring 24 1024", with "timing"
# appended for a timing-only run, "noguard" for kb.sim{guard = false},
# "huge" for kbsim --huge-pages, "small" for --no-huge-pages (decisions
# 0072, 0073: huge pages are the default where the kernel gives them on
# request).
#
# Table 2: bench/lua/abring.lua (kbsim) and kbsim-bench-simgrid at N = 8,
# 64, 512 (--quick: 8), one 128-byte chunk a step, alternating run by run,
# R runs each (default 3), the median CPU; each run's simulated time is
# checked against the closed form by the program itself (exit 1 otherwise).
# --no-ab leaves table 2 out.
#
# CPU is user + sys of the whole process (bash's time, to the ms; peak
# RSS from /usr/bin/time), so it includes
# building the system and writing the values; CPU per activation is that
# over sim:stats().activations. A run that fails shows its error in the
# row and makes the script exit 1 after the tables.
set -uo pipefail

usage() { echo "usage: bench/scale.sh BUILD_DIR [--quick | --full] [--reps R] [--no-ab] [CASE ...]" >&2; exit 2; }
build=${1:-}
[ -n "$build" ] || usage
shift
here=$(cd "$(dirname "$0")" && pwd)
kbsim=$build/kbsim
simgrid=$build/kbsim-bench-simgrid
[ -x "$kbsim" ] || { echo "scale.sh: no kbsim in '$build'" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "scale.sh: /usr/bin/time is needed (Debian: apt-get install time)" >&2; exit 2; }

mode=default reps=3 cases=() no_ab=
while [ $# -gt 0 ]; do
  case $1 in
    --quick) mode=quick ;;
    --full) mode=full ;;
    --no-ab) no_ab=1 ;;
    --reps) shift; reps=${1:-}; [[ $reps =~ ^[1-9][0-9]*$ ]] || usage ;;
    -*) usage ;;
    *) cases+=("$1") ;;
  esac
  shift
done

skipped=()
if [ ${#cases[@]} -eq 0 ]; then
  case $mode in
    quick) cases=("lrab 6 1024" "ring 6 1024"); ring_ns=(8) ;;
    *)
      for s in 6 24 96; do
        for e in 1024 49152; do cases+=("lrab $s $e"); done
      done
      cases+=("ring 6 1024" "ring 6 49152" "ring 24 1024" "ring 24 49152" "ring 96 1024")
      big=("ring 96 49152" "lrab 384 1024" "lrab 384 49152" "lrab 1024 1024" "lrab 1024 49152"
           "ring 384 1024" "ring 384 49152" "ring 1024 1024" "ring 1024 49152")
      if [ $mode = full ]; then cases+=("${big[@]}"); else skipped=("${big[@]}"); fi
      ring_ns=(8 64 512) ;;
  esac
else
  ring_ns=(8 64 512)
  [ $mode = quick ] && ring_ns=(8)
fi

out=$(mktemp) err=$(mktemp) tim=$(mktemp) tcpu=$(mktemp)
trap 'rm -f "$out" "$err" "$tim" "$tcpu"' EXIT
status=0

# run CMD...: runs it under /usr/bin/time; sets cpu (s), rss (MiB), line
# (its last stdout line) and fail (empty, or the reason)
run() {
  fail=
  local rc u s m TIMEFORMAT='%3U %3S'
  # bash's time for CPU (ms resolution), /usr/bin/time's for peak RSS
  { time /usr/bin/time -o "$tim" -f '%M' "$@" >"$out" 2>"$err"; } 2>"$tcpu"
  rc=$?
  read -r u s < <(tail -n 1 "$tcpu")
  m=$(tail -n 1 "$tim")
  cpu=$(awk -v u="$u" -v s="$s" 'BEGIN { printf "%.3f", u + s }')
  rss=$(awk -v m="$m" 'BEGIN { printf "%.1f", m / 1024 }')
  line=$(tail -n 1 "$out")
  if [ $rc -ne 0 ]; then
    fail="exit $rc: $( (grep -v '^Command exited' "$err"; cat "$out") | grep . | tail -n 1 | cut -c1-160)"
    status=1
  fi
}
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$line"; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "kbsim scale benchmark: $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs, build $build ($(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null))"
echo
echo "| workload | SIPs | participants | n_elem | run | CPU s | max RSS MiB | activations | CPU µs / activation | simulated ns | check |"
echo "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---|"
for c in "${cases[@]}"; do
  read -r alg sips nel rest <<<"$c"
  args=(algorithm="$alg" sips="$sips" n_elem="$nel")
  flags=()
  kind=values
  for x in $rest; do
    case $x in
      timing) args+=(values=no); kind=timing ;;
      noguard) args+=(guard=no); kind="$kind, no guard" ;;
      huge) flags+=(--huge-pages); kind="$kind, --huge-pages" ;;
      small) flags+=(--no-huge-pages); kind="$kind, --no-huge-pages" ;;
      *) echo "scale.sh: unknown word '$x' in case '$c'" >&2; exit 2 ;;
    esac
  done
  run "$kbsim" "${flags[@]}" -q "$here/lua/scale_allreduce.lua" "${args[@]}"
  if [ -n "$fail" ]; then
    printf '| %s | %s | | %s | %s | %s | %s | | | | failed (%s) |\n' "$alg" "$sips" "$nel" "$kind" "$cpu" "$rss" "$fail"
    continue
  fi
  act=$(field activations)
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$alg" "$sips" \
    "$(field participants)" "$nel" "$kind" "$cpu" "$rss" "$act" \
    "$(awk -v c="$cpu" -v a="$act" 'BEGIN { printf "%.2f", (a > 0 ? c * 1e6 / a : 0) }')" \
    "$(field latency_ns)" "$(field check)"
done
if [ ${#skipped[@]} -gt 0 ]; then
  echo
  echo "Not run (--full runs them; ring 96 49152 takes tens of minutes, 384 and 1024 SIPs minutes to hours and up to ~12 GB): $(IFS=,; echo "${skipped[*]}" | sed 's/,/, /g')."
fi

[ -z "$no_ab" ] || exit $status
echo
echo "Pure α-β ring all-reduce (ring_rs_ag_allreduce, 100 ns / 128 GB/s links, 128 B a step), median of $reps alternating runs:"
echo
have_sg=
[ -x "$simgrid" ] && have_sg=1
echo "| N | bytes a rank | closed form ns | kbsim ns | kbsim CPU s | kbsim max RSS MiB | activations | SimGrid ns | SimGrid CPU s | SimGrid max RSS MiB | kbsim / SimGrid CPU |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for n in "${ring_ns[@]}"; do
  kc=() kr=() sc=() sr=() kns= sns= closed= bytes= act= kfail= sfail=
  for ((i = 0; i < reps; i++)); do
    run "$kbsim" -q "$here/lua/abring.lua" n="$n"
    if [ -n "$fail" ]; then kfail=$fail; else
      kc+=("$cpu"); kr+=("$rss"); kns=$(field sim_ns); closed=$(field closed_ns)
      bytes=$(field bytes); act=$(field activations)
    fi
    if [ -n "$have_sg" ]; then
      run "$simgrid" "$n"
      if [ -n "$fail" ]; then sfail=$fail; else
        sc+=("$cpu"); sr+=("$rss"); sns=$(field sim_ns); closed=$(field closed_ns)
      fi
    fi
  done
  med() { printf '%s\n' "$@" | median; }
  kcpu= krss= scpu= srss= ratio=
  [ -z "$kfail" ] && { kcpu=$(med "${kc[@]}"); krss=$(med "${kr[@]}"); } || kns="failed ($kfail)"
  if [ -z "$have_sg" ]; then
    sns="not built"
  elif [ -z "$sfail" ]; then
    scpu=$(med "${sc[@]}"); srss=$(med "${sr[@]}")
  else
    sns="failed ($sfail)"
  fi
  if [ -n "$kcpu" ] && [ -n "$scpu" ]; then
    ratio=$(awk -v k="$kcpu" -v s="$scpu" 'BEGIN { if (s > 0) printf "%.2f", k / s; else print "—" }')
  fi
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$n" "$bytes" "$closed" "$kns" \
    "$kcpu" "$krss" "$act" "$sns" "$scpu" "$srss" "$ratio"
done
[ -n "$have_sg" ] || { echo; echo "The SimGrid peer is not built: apt-get install libsimgrid-dev, then reconfigure (KBSIM_SIMGRID_BENCH=ON by default)."; }
exit $status
