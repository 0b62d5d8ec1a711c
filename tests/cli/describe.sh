#!/bin/sh
# describe.sh KBSIM SRCDIR WORKDIR — kbsim --describe and --describe-dot list
# the modules, ports and bindings of a system (decision 0027): exact counts
# and lines for a graph and for a grid, the IPCQs' buffer port following
# ipcq.buffer_kind, the Graphviz file drawn by dot (when installed) with one
# edge a binding, and the errors (a script given, a missing memory).
set -u
kbsim=$1 src=$2 work=$3
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work" || fail "cannot make $work"
cd "$src" || fail "no $src"
graph=tests/cli/cases/graph4.yaml

# a graph of 4 PEs: per PE cpu (5 ports), dma, math, gemm (1 each), ipcq (3),
# tcm (1) = 6 modules, 12 ports, 6 bindings; and the fabric (decision 0038),
# every link made: 5 nodes NODE.net and 8 links, 2 ports each, 16 bindings
"$kbsim" --describe --topology $graph > "$work/g.txt" 2>&1 || { cat "$work/g.txt"; fail "graph"; }
has() { grep -qxF -- "$2" "$1" || { head -20 "$1"; fail "no line '$2' in $1"; }; }
has "$work/g.txt" "graph: 5 nodes, 4 PEs, 8 links"
has "$work/g.txt" "links made 8 of 8"
has "$work/g.txt" "modules 37, ports 74, bindings 40"
grep -A2 -x "sw.net" "$work/g.txt" > "$work/sw.txt"
has "$work/sw.txt" "  in    in    kb_flit_if 0..*  <- a->sw.out, b->sw.out, c->sw.out, d->sw.out"
has "$work/sw.txt" "  out   out   kb_flit_if 0..*  -> sw->a.in, sw->b.in, sw->c.in, sw->d.in"
grep -A2 -x "b->sw" "$work/g.txt" > "$work/bsw.txt"
has "$work/bsw.txt" "  in    in    kb_flit_if 0..1  <- b.net.out"
has "$work/bsw.txt" "  out   out   kb_flit_if 1..1  -> sw.net.in"
has "$work/g.txt" "  out   dma   kb_dma_if  1..1  -> c.dma.in"
has "$work/g.txt" "  in    in    kb_dma_if  0..4  <- d.cpu.dma, d.ipcq.dma"
has "$work/g.txt" "  out   buf   kb_mem_if  1..1  -> b.tcm.in"
has "$work/g.txt" "  in    in    kb_mem_if  0..*  <- a.ipcq.buf"
[ "$(grep -c '^  out   math  kb_math_if 0..1  -> ..math.in$' "$work/g.txt")" = 4 ] || fail "math bindings"

# a grid of one SIP (16 cubes x 8 PEs) with the rings in the cube's SRAM:
# every PE's ipcq.buf is bound to its cube's SRAM, which has 8 users
"$kbsim" --describe --set sips.count=1 --set ipcq.buffer_kind=sram > "$work/s.txt" 2>&1 \
  || { cat "$work/s.txt"; fail "grid"; }
# 128 PEs x 5 units (11 ports), 16 SRAMs, 128 TCMs and 128 HBMs (listed though unbound);
# 416 nodes and 976 links, 2 ports each, 2 bindings a link
has "$work/s.txt" "modules 2304, ports 4464, bindings 2720"
# the SRAM's node is a module of its own beside the SRAM
has "$work/s.txt" "sip0.cube3.sram.net"
has "$work/s.txt" "  out   out   kb_flit_if 1..1  -> sip0.cube3.sram.net.in"
has "$work/s.txt" "  out   buf   kb_mem_if  1..1  -> sip0.cube3.sram.in"
line=$(grep -A1 -x "sip0.cube3.sram" "$work/s.txt" | tail -1)
[ "$(printf '%s' "$line" | tr ',' '\n' | grep -c 'ipcq.buf')" = 8 ] || fail "sram users: $line"
has "$work/s.txt" "sip0.cube0.pe0.tcm"

# the Graphviz file: one node a module, one edge a binding
"$kbsim" --describe-dot "$work/g.dot" --topology $graph > "$work/dot.log" 2>&1 \
  || { cat "$work/dot.log"; fail "dot"; }
[ ! -s "$work/dot.log" ] || fail "--describe-dot alone printed: $(cat "$work/dot.log")"
[ "$(grep -c ' -> ' "$work/g.dot")" = 40 ] || fail "edges"
[ "$(grep -c '\[label="{' "$work/g.dot")" = 37 ] || fail "nodes"
grep -qF '"a->sw":"p_out" -> "sw.net":"p_in" [label="kb_flit_if"];' "$work/g.dot" || fail "edge a->sw.out"
grep -qF '"a->sw" [label="{a-\>sw|{<p_in> in|<p_out> out}}"];' "$work/g.dot" || fail "label a->sw"
grep -qF '"a.ipcq":"p_buf" -> "a.tcm":"p_in" [label="kb_mem_if"];' "$work/g.dot" || fail "edge a.ipcq.buf"
if command -v dot > /dev/null; then
  dot -Tsvg "$work/g.dot" > "$work/g.svg" || fail "dot -Tsvg"
  grep -q "a.ipcq" "$work/g.svg" || fail "svg"
fi

# a script (decision 0040): it runs, then every system it made is listed, one
# closed by the script as it was then (with its Lua module and placed math
# unit), one still open at the end; the Graphviz file draws the first
cases=tests/cli/cases
(cd $cases && "$kbsim" --describe describe_script.lua) > "$work/sc.txt" 2> "$work/sc.err" \
  || { cat "$work/sc.txt" "$work/sc.err"; fail "script"; }
[ ! -s "$work/sc.err" ] || fail "script stderr: $(cat "$work/sc.err")"
[ "$(head -1 "$work/sc.txt")" = "the script ran: add took 1.0 ns" ] || fail "the script's own output first"
has "$work/sc.txt" "# system 1 of 2, made at describe_script.lua:6"
has "$work/sc.txt" "# system 2 of 2, made at describe_script.lua:21"
# system 1: the 24 modules of 4 PEs + sw.filter + sw.math; 24 + 3 bindings
has "$work/sc.txt" "modules 26, ports 52, bindings 27"
has "$work/sc.txt" "  out   math  kb_math_if 1..1  -> sw.math.in"
has "$work/sc.txt" "  in    in    kb_math_if 0..1  <- sw.filter.math"
has "$work/sc.txt" "  in    in    kb_dma_if  0..4  <- a.cpu.dma, a.ipcq.dma, sw.filter.dma"
# system 2: 24 modules + c.probe, its one binding to c's CPU
has "$work/sc.txt" "modules 25, ports 49, bindings 25"
has "$work/sc.txt" "  out   cpu   kb_cpu_if  1..1  -> c.cpu.in"
[ "$(grep -c '^# system' "$work/sc.txt")" = 2 ] || fail "two systems"
(cd $cases && "$kbsim" --describe-dot "$work/sc.dot" describe_script.lua) > "$work/scd.txt" 2>&1 \
  || { cat "$work/scd.txt"; fail "script dot"; }
grep -qxF "kbsim: --describe-dot drew system 1 of 2 (made at describe_script.lua:6)" "$work/scd.txt" \
  || fail "dot note: $(cat "$work/scd.txt")"
[ "$(grep -c ' -> ' "$work/sc.dot")" = 27 ] || fail "script dot edges"
grep -qF '"sw.filter":"p_math" -> "sw.math":"p_in" [label="kb_math_if"];' "$work/sc.dot" \
  || fail "edge sw.filter.math"
if command -v dot > /dev/null; then
  dot -Tsvg "$work/sc.dot" > "$work/sc.svg" || fail "dot -Tsvg of the script's system"
fi

# errors: a script that makes no system, a missing memory, a file that cannot be written
out=$(cd $cases && "$kbsim" --describe describe_nosys.lua 2>&1); [ $? -eq 2 ] || fail "no system"
printf '%s' "$out" | grep -qF "kbsim: --describe: the script made no system (kb.system; those of kb.sweep points are not listed)" \
  || fail "no system: $out"
out=$("$kbsim" --describe --topology $graph --set ipcq.buffer_kind=hbm 2>&1); [ $? -eq 2 ] || fail "hbm"
[ "$out" = "kbsim: sys:describe: ipcq of 'a': buffer_kind 'hbm' but the PE has no hbm" ] \
  || fail "hbm: $out"
out=$("$kbsim" --describe-dot "$work/no/such/dir.dot" --topology $graph 2>&1); [ $? -eq 2 ] || fail "dir"
printf '%s' "$out" | grep -qF "kbsim: --describe-dot: cannot write $work/no/such/dir.dot: $work/no/such: No such file or directory" \
  || fail "dir: $out"

# a system too large for the memory the process may have: refused before
# any unit is made, with the estimate (it ran until an allocation failed,
# the machine's memory taken first). Under ulimit -v 2 GB a grid of one SIP
# is listed; 1024 SIPs (131,072 PEs, ~2 GiB to list) are refused. Skipped
# where the limit stops even the small one (AddressSanitizer reserves more)
if (ulimit -v 2000000 && "$kbsim" --describe --set sips.count=1 > /dev/null 2>&1); then
  out=$(ulimit -v 2000000 && "$kbsim" --describe --set sips.count=1024 2>&1); st=$?
  [ $st -eq 2 ] || fail "1024 SIPs under ulimit -v: exit status $st"
  printf '%s' "$out" | grep -qE "^kbsim: sys:describe: listing 131072 PEs and 1007616 links needs about [0-9.]+ GiB \(~10 KiB a PE, ~700 B a link\), more than the [0-9.]+ GiB this process can still have \(available memory, cgroup limit, ulimit -v\)" \
    || fail "1024 SIPs under ulimit -v: $out"
  # a system itself far larger (16,777,216 PEs, ~32 GiB) is refused before it is made (it
  # was made until an allocation failed, or the OOM killer came first)
  out=$(ulimit -v 2000000 && "$kbsim" --describe --set sips.count=2048 --set sip.cube_mesh.w=32 \
    --set sip.cube_mesh.h=32 --set sips.topology=torus_2d --set sips.w=32 --set sips.h=64 2>&1); st=$?
  [ $st -eq 2 ] || fail "16,777,216 PEs under ulimit -v: exit status $st"
  printf '%s' "$out" | grep -qE "^kbsim: kb.system: 16777216 PEs need about 32.0 GiB \(~2 KiB a PE\), more than the [0-9.]+ GiB this process can still have" \
    || fail "16,777,216 PEs under ulimit -v: $out"
fi
# a script can write a listing to a file instead of holding it
(cd $cases && "$kbsim" --set sips.count=1 describe_to.lua "$work/to.txt") > "$work/to.log" 2>&1 \
  || { cat "$work/to.log"; fail "sys:describe{to = file}"; }
"$kbsim" --describe --set sips.count=1 > "$work/s1.txt" 2>&1
cmp "$work/s1.txt" "$work/to.txt" || fail "sys:describe{to = file} differs from --describe"
echo "describe ok"
