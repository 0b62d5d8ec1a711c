#!/bin/sh
# lua_module.sh BUILD [RUNS] — the host cost of a module written in Lua
# (decision 0035, bench/README.md "Modules written in Lua"):
#  1. CPU ns per call through a port: plain Lua call, a bound C export
#     (kb_dma_if), a bound Lua export (bench/lua/port_calls.lua);
#  2. CPU seconds (user + sys, median of RUNS, the runs alternating) of one
#     all-reduce on 4 ranks around a switch: through the Lua unit of
#     scenarios/innet_reduce.lua (ring=no), by the C-kernel ring
#     (bench/lua/ring_star.lua), and kbsim's floor (ring_star.lua --help:
#     the state made and the library loaded, nothing built), at n_elem
#     1024, 16384, 65536, 262144.
set -u
b=${1:?usage: lua_module.sh BUILD [RUNS]}; runs=${2:-5}
k=$(readlink -f "$b/kbsim"); cd "$(dirname "$0")/.." || exit 1
"$k" bench/lua/port_calls.lua 1000000 || exit 1
cpu() { /usr/bin/time -f "%U %S" "$@" 2>&1 >/dev/null | tail -1 | awk '{print $1 + $2}'; }
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
printf '%-8s %12s %12s %12s\n' n_elem "unit_cpu_s" "ring_cpu_s" "floor_cpu_s"
for n in 1024 16384 65536 262144; do
  : > /tmp/lm_u.$$; : > /tmp/lm_r.$$; : > /tmp/lm_f.$$
  i=0
  while [ $i -lt "$runs" ]; do
    cpu "$k" scenarios/innet_reduce.lua n_elem=$n ring=no >> /tmp/lm_u.$$
    cpu "$k" bench/lua/ring_star.lua n_elem=$n >> /tmp/lm_r.$$
    cpu "$k" bench/lua/ring_star.lua --help >> /tmp/lm_f.$$
    i=$((i + 1))
  done
  printf '%-8s %12s %12s %12s\n' $n "$(median < /tmp/lm_u.$$)" "$(median < /tmp/lm_r.$$)" \
    "$(median < /tmp/lm_f.$$)"
done
rm -f /tmp/lm_u.$$ /tmp/lm_r.$$ /tmp/lm_f.$$
