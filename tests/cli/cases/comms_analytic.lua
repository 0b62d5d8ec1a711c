-- comms_analytic.lua — analytic.lua's α-β costs against the simulation on a contention-free ring, within 0.1 %
--
-- The set-up of ccl_closed_form.lua (run with the same --set, see
-- tests/cli/CMakeLists.txt): an 8-PE graph ring of 64 GB/s, 20 ns links,
-- dispatch, memory time and slot limits made negligible, so one hop of B
-- bytes costs alpha + B/bw with alpha the data's latency plus the credit's
-- flight back. Every ring algorithm of the benchmark then matches its
-- Hockney formula from lua/kbsim/analytic.lua; gamma is the vector unit's
-- time per byte of the chunk a step adds (whole cycles at 1 GHz).
local kb = require("kbsim")
local T = require("kbsim.torch")
local tl = require("kbsim.tl")
local an = require("kbsim.analytic")

local N, BW, LAT = 8, 64, 20 -- PEs, GB/s, ns
local C = 2048                -- f32 elements per rank and chunk: S/N = 8 KiB
local VEC = tonumber(kb.options.set["pe.math.vector_bytes_per_cycle"] or "128")

local ring = require("ring_case")

local function math_ns(bytes) return math.ceil(bytes / VEC) end

-- A torch on the ring with a process group of all 8 PEs.
local function ring_torch(algorithm)
  local torch = T.init{topology = ring.graph(N, BW, LAT, true)}
  torch.distributed.init_process_group{backend = "ahbm", config = {ccl = {dtype = "f32",
    algorithm = algorithm, algorithms = {[algorithm] = {world_size = N}}}}}
  return torch
end

local probe = ring_torch("ring_rs_ag_allreduce")
local alpha = probe.sys:path(0, 1).latency_ns(0) + probe.sys:path(1, 0).latency_ns(16)

local cases = {
  {name = "ring_rs_ag_allreduce", formula = "ring_allreduce_bw", size = N * C * 4,
   gamma_bytes = C * 4, run = function(torch, D)
     local t = torch.zeros({1, N * N * C})
     for r = 0, N - 1 do t:shard_write_vec(r, tl.vec_new(N * C, r)) end
     return D.all_reduce(t)
   end},
  {name = "ring_allreduce", formula = "ring_allreduce", size = C * 4, gamma_bytes = C * 4,
   run = function(torch, D)
     local t = torch.zeros({1, N * C})
     for r = 0, N - 1 do t:shard_write_vec(r, tl.vec_new(C, r)) end
     return D.all_reduce(t)
   end},
  {name = "all_gather", formula = "all_gather", size = N * C * 4, run = function(torch, D)
     local inp, out = torch.zeros({1, N * C}), torch.zeros({1, N * N * C})
     for r = 0, N - 1 do inp:shard_write_vec(r, tl.vec_new(C, r)) end
     return D.all_gather(out, inp)
   end},
  {name = "reduce_scatter", formula = "reduce_scatter", size = N * C * 4, gamma_bytes = C * 4,
   run = function(torch, D)
     local inp, out = torch.zeros({1, N * N * C}), torch.zeros({1, N * C})
     for r = 0, N - 1 do inp:shard_write_vec(r, tl.vec_new(N * C, r)) end
     return D.reduce_scatter(out, inp)
   end},
  {name = "broadcast", formula = "broadcast_ring", size = C * 4, run = function(torch, D)
     local t = torch.zeros({1, N * C})
     t:shard_write_vec(0, tl.vec_affine(C, 1, 0))
     return D.broadcast(t, 0)
   end},
}

for _, c in ipairs(cases) do
  local algorithm = c.formula:match("allreduce") and c.name or "ring_rs_ag_allreduce"
  local torch = ring_torch(algorithm)
  local rep = c.run(torch, torch.distributed)
  kb.check(rep.check == "passed", c.name .. ": values")
  local gamma = c.gamma_bytes and math_ns(c.gamma_bytes) / c.gamma_bytes or 0
  local want = an.hockney[c.formula](N, c.size, {alpha = alpha, bw = BW, gamma = gamma})
  local err = math.abs(rep.latency_ns - want) / want
  print(("%-22s S=%6d B: simulated %10.3f ns, analytic %-18s %10.3f ns, error %.4f%%")
    :format(c.name, c.size, rep.latency_ns, c.formula, want, 100 * err))
  kb.check(err < 1e-3, ("%s: simulated %.3f ns is %.4f%% off the analytic %.3f ns")
    :format(c.name, rep.latency_ns, 100 * err, want))
end
print("comms_analytic ok")
