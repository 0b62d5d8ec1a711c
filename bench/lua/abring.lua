-- abring.lua — the pure α-β ring all-reduce (bench/scale.sh; the SimGrid
-- peer is bench/simgrid/ring_allreduce.cpp)
--
--   kbsim bench/lua/abring.lua n=512 [chunk=128] [alpha_ns=100] [bw_gbps=128] [values=no]
--
-- ring_rs_ag_allreduce on a graph ring of n PEs p0 -> p1 -> ... -> p0,
-- each ring link alpha_ns and bw_gbps, and every other cost of the model
-- set to zero so that the run is exact against the closed form
--
--   T = 2 (n-1) (alpha + c / bw) + (n-1) t_add
--
-- with c = chunk bytes a step (the tile is B = n * c bytes a rank, f16) and
-- t_add = 1 ps, one cycle at clock_ghz = 1000, the fastest clock the schema
-- allows: PE_MATH charges at least one cycle for an add of any size, so the
-- reduce-scatter's n-1 adds cannot be made free (the SimGrid peer executes
-- the same 1 ps add). What is zeroed, and why it is then exactly zero in
-- integer picoseconds:
--   - PE_CPU dispatch: pe.cpu.dispatch_cycles = 0;
--   - TCM (loads, stores, the IPCQ slot read): setup 0 ns, 1e6 GB/s, so a
--     chunk below 500 B rounds to 0 ps;
--   - the IPCQ credit: it travels back over a reverse link p<i+1> -> p<i>
--     of 0 ns and 1e6 GB/s (16 B: 0.016 ps, rounds to 0), a free sideband,
--     instead of n-1 ring links round; the data still takes the one ring
--     link (fewest links);
--   - slot size = chunk, so every message is one slot; 4 slots a ring, and
--     a sender never waits for a credit (each step's receive returns the
--     credit before the next send).
-- c / bw is exact in ps when c is a multiple of 16 B at 128 GB/s (7.8125
-- ps a byte): the default c = 128 B is 1 ns a step.
--
-- Prints one line: n, bytes a rank, simulated ns, closed form ns, the
-- kernel's counters (sim:stats()), and "exact" or "MISMATCH" (exit 1).
local kb = require("kbsim")
local p = kb.params({
  n = {default = 8, type = "integer", min = 2, help = "PEs in the ring"},
  chunk = {default = 128, type = "bytes", min = 1,
           help = "bytes a step (each rank holds n * chunk bytes, f16)"},
  alpha_ns = {default = 100, type = "number", min = 0, help = "ring link latency, ns"},
  bw_gbps = {default = 128, type = "number", min = 0.001, help = "ring link bandwidth, GB/s"},
  values = {default = false, type = "boolean",
            help = "move and check the values (default: timing only, as the SimGrid peer)"},
}, {about = "the pure alpha-beta ring all-reduce against its closed form (bench/scale.sh)",
    refuse_topology = "the script builds its own graph ring",
    check = function(q)
      if q.chunk % 2 ~= 0 then return "chunk must be a whole number of f16 elements (even)" end
    end})

local T = require("kbsim.torch")
local tl = require("kbsim.tl")
local ccl = require("kbsim.ccl")

local N, C = p.n, p.chunk
local FREE_GBPS = 1e6 -- the schema's largest bandwidth

local g = {
  clock_ghz = 1000,
  pe = {cpu = {dispatch_cycles = 0}, tcm = {setup_ns = 0, bandwidth_gbps = FREE_GBPS},
        math = {vector_bytes_per_cycle = 1 << 30}},
  ipcq = {slot_size = C},
  nodes = {}, links = {},
}
for i = 0, N - 1 do g.nodes[i + 1] = {name = "p" .. i, pe = true} end
for i = 0, N - 1 do
  local j = (i + 1) % N
  g.links[#g.links + 1] = {from = "p" .. i, to = "p" .. j, bandwidth_gbps = p.bw_gbps,
                           latency_ns = p.alpha_ns}
  g.links[#g.links + 1] = {from = "p" .. j, to = "p" .. i, bandwidth_gbps = FREE_GBPS,
                           latency_ns = 0}
end

local torch = T.init{topology = g, timing_only = not p.values}
local n_elem = N * C // 2
local ranks = {}
for i = 0, N - 1 do ranks[i + 1] = i end
local t = torch.zeros({1, N * n_elem}, {dtype = "f16", ranks = ranks})
if p.values then
  -- rank r holds (r + j) mod 4: small integers, exact in f16 when summed
  for r = 0, N - 1 do t:shard_write_vec(r, tl.vec_affine(n_elem, 1, r):mod(4)) end
end
local algo = ccl.get("ring_rs_ag_allreduce")
local a = algo.args(N, n_elem, {dtype = "f16"})
algo.wire(torch.sys, ranks, a)
local run = tl.launch(torch.sys, ranks, algo.kernel, a, t, t)
torch.sim:run()
local got = run:latency_ns()

local check = "skipped"
if p.values then
  -- element j sums (r + j) mod 4 over r
  local want = {}
  for j = 0, n_elem - 1 do
    local s = 0
    for r = 0, N - 1 do s = s + (r + j) % 4 end
    want[j + 1] = s
  end
  check = "passed"
  for _, r in ipairs({0, N // 2, N - 1}) do
    local sh = t:shard_table(r)
    for j = 1, n_elem do
      if sh[j] ~= want[j] then check = "failed" break end
    end
  end
end

-- the closed form, in integer ps: alpha and c / bw each rounded to the ps
-- as the link rounds them (exact for the defaults)
local alpha_ps = math.floor(p.alpha_ns * 1000 + 0.5)
local ser_ps = math.floor(C * 1000 / p.bw_gbps + 0.5)
local add_ps = 1
local want_ps = 2 * (N - 1) * (alpha_ps + ser_ps) + (N - 1) * add_ps
local got_ps = math.floor(got * 1000 + 0.5)
local st = torch.sim:stats()
local ok = got_ps == want_ps and check ~= "failed"
print(("abring n=%d bytes=%d sim_ns=%.3f closed_ns=%.3f activations=%d timed_events=%d "
  .. "switches=%d values=%s %s"):format(N, N * C, got, want_ps / 1000, st.activations,
  st.timed_events, st.switches, check, ok and "exact" or "MISMATCH"))
if not ok then os.exit(1) end
