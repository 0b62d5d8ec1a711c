-- ring_case.lua — for the cases that check collectives against closed
-- forms on a contention-free ring of PEs "p0".."p<n-1>"
local M = {}

-- A graph topology: each link p<i> -> p<i+1> of bandwidth bw GB/s and
-- latency lat ns, both ways when bidirectional (else a one-way ring).
function M.graph(n, bw, lat, bidirectional)
  local g = {nodes = {}, links = {}}
  for i = 0, n - 1 do g.nodes[#g.nodes + 1] = {name = "p" .. i, pe = true} end
  for i = 0, n - 1 do
    g.links[#g.links + 1] = {from = "p" .. i, to = "p" .. ((i + 1) % n), bandwidth_gbps = bw,
                             latency_ns = lat, bidirectional = bidirectional}
  end
  return g
end

-- Runs all-reduce algorithm `alg` straight from the registry (no ccl.yaml)
-- on ranks 0..n-1 of a new torch on `topology`, s_elem f32 elements a
-- rank, checks the sums of the first and last ranks and returns the
-- latency and the torch.
function M.allreduce(topology, alg, n, s_elem)
  local kb = require("kbsim")
  local T = require("kbsim.torch")
  local tl = require("kbsim.tl")
  local ccl = require("kbsim.ccl")
  local torch = T.init{topology = topology}
  local ranks = {}
  for i = 0, n - 1 do ranks[i + 1] = i end
  local t = torch.zeros({1, n * s_elem}, {dtype = "f32", ranks = ranks})
  local v = {}
  for k = 1, n * s_elem do v[k] = k % 7 end
  t:copy_(torch.from_table(v, {dtype = "f32"}))
  local algo = ccl.get(alg)
  local a = algo.args(n, s_elem, {dtype = "f32"})
  algo.wire(torch.sys, ranks, a)
  local r = tl.launch(torch.sys, ranks, algo.kernel, a, t, t)
  torch.sim:run()
  for _, rank in ipairs({0, n - 1}) do
    local got, bad = t:shard_table(rank), 0
    for j = 1, s_elem do
      local want = 0
      for q = 0, n - 1 do want = want + (q * s_elem + j) % 7 end
      if got[j] ~= want then bad = bad + 1 end
    end
    kb.check(bad == 0, ("%s: %d elements of rank %d wrong"):format(alg, bad, rank))
  end
  return r:latency_ns(), torch
end

return M
