-- ccl_closed_form.lua — ring all-reduce times against their closed forms on a contention-free graph ring
--
-- Run with dispatch, setups and memory time made negligible (see
-- tests/cli/CMakeLists.txt): pe.cpu.dispatch_cycles=0, a very fast TCM,
-- a wide vector unit and IPCQ slots large enough for a whole tile. One
-- hop of B bytes then costs alpha + B/bw, where alpha is the link latency
-- of the data plus the credit's return (the receiver is busy for it):
--   ring_rs_ag_allreduce  2(N-1) (alpha + (S/N)/bw)   + (N-1) math(S/N)
--   ring_allreduce         (N-1) (alpha + S/bw)        + (N-1) math(S)
local kb = require("kbsim")
local T = require("kbsim.torch")
local tl = require("kbsim.tl")
local ccl = require("kbsim.ccl")

local N, BW, LAT = 8, 64, 20 -- PEs, GB/s, ns
local S_ELEM = 16384          -- f32 elements per rank: S = 64 KiB
local VEC = tonumber(kb.options.set["pe.math.vector_bytes_per_cycle"] or "128")

local function ring_graph()
  local g = {nodes = {}, links = {}}
  for i = 0, N - 1 do g.nodes[#g.nodes + 1] = {name = "p" .. i, pe = true} end
  for i = 0, N - 1 do
    g.links[#g.links + 1] = {from = "p" .. i, to = "p" .. ((i + 1) % N), bandwidth_gbps = BW,
                             latency_ns = LAT, bidirectional = true}
  end
  return g
end

local function math_ns(bytes) return math.ceil(bytes / VEC) end -- 1 GHz, one cycle per vector

-- Runs algorithm `alg` straight from the registry (no ccl.yaml), checks
-- the sums and returns the latency and the system.
local function run(alg)
  local torch = T.init{topology = ring_graph()}
  local ranks = {}
  for i = 0, N - 1 do ranks[i + 1] = i end
  local t = torch.zeros({1, N * S_ELEM}, {dtype = "f32", ranks = ranks})
  local v = {}
  for k = 1, N * S_ELEM do v[k] = k % 7 end
  t:copy_(torch.from_table(v, {dtype = "f32"}))
  local algo = ccl.get(alg)
  local a = algo.args(N, S_ELEM, {dtype = "f32"})
  algo.wire(torch.sys, ranks, a)
  local r = tl.launch(torch.sys, ranks, algo.kernel, a, t, t)
  torch.sim:run()
  local got, bad = t:shard_table(0), 0
  for j = 1, S_ELEM do
    local want = 0
    for q = 0, N - 1 do want = want + (q * S_ELEM + j) % 7 end
    if got[j] ~= want then bad = bad + 1 end
  end
  kb.check(bad == 0, ("%s: %d elements of rank 0 wrong"):format(alg, bad))
  return r:latency_ns(), torch.sys
end

local S = S_ELEM * 4
local lat, sys = run("ring_rs_ag_allreduce")
-- alpha from the system's own path times: data latency one hop east,
-- the 16-byte credit's flight back west
local east, west = sys:path(0, 1), sys:path(1, 0)
local alpha = east.latency_ns(0) + west.latency_ns(16)
local want = 2 * (N - 1) * (alpha + (S / N) / BW) + (N - 1) * math_ns(S / N)
local err = math.abs(lat - want) / want
print(("ring_rs_ag_allreduce N=%d S=%d B: %.3f ns, closed form %.3f ns (alpha %.3f ns), error %.4f%%")
  :format(N, S, lat, want, alpha, 100 * err))
kb.check(err < 1e-3, ("ring_rs_ag_allreduce: %.3f ns is %.4f%% off %.3f ns"):format(lat,
  100 * err, want))

lat = run("ring_allreduce")
want = (N - 1) * (alpha + S / BW) + (N - 1) * math_ns(S)
err = math.abs(lat - want) / want
print(("ring_allreduce       N=%d S=%d B: %.3f ns, closed form %.3f ns, error %.4f%%")
  :format(N, S, lat, want, 100 * err))
kb.check(err < 1e-3, ("ring_allreduce: %.3f ns is %.4f%% off %.3f ns"):format(lat,
  100 * err, want))
print("ccl_closed_form ok")
