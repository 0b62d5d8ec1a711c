-- ring_step_cost.lua — what a step of the pure α-β ring all-reduce costs
-- the kernel (the simulator's work, not simulated time): counted, not
-- timed. The ring is bench/lua/abring.lua's (every cost but the ring
-- links' α and c/bw and PE_MATH's 1 ps add zeroed), so the run must also
-- be exact against its closed form
--   T = 2 (n-1) (alpha + c / bw) + (n-1) t_add.
-- A step's receive runs as a method process and does not wait for a
-- slot read or a credit that take no time (decision 0052): no stack and
-- no context switch of its own, two activations, so a step takes at most
-- SWITCHES context switches (the kernel's) and ACTIVATIONS activations
-- (10.8 and 7.8 with the receive a thread waiting a delta for each).
--   kbsim ring_step_cost.lua [values]
local kb = require("kbsim")
local T = require("kbsim.torch")
local tl = require("kbsim.tl")
local ccl = require("kbsim.ccl")

local ACTIVATIONS, SWITCHES = 8.8, 3.0 -- a step's, at most (n = 16)

local function ring(n, values)
  local C, FREE = 128, 1e6
  local g = {
    clock_ghz = 1000,
    pe = {cpu = {dispatch_cycles = 0}, tcm = {setup_ns = 0, bandwidth_gbps = FREE},
          math = {vector_bytes_per_cycle = 1 << 30}},
    ipcq = {slot_size = C}, nodes = {}, links = {},
  }
  for i = 0, n - 1 do g.nodes[i + 1] = {name = "p" .. i, pe = true} end
  for i = 0, n - 1 do
    local j = (i + 1) % n
    g.links[#g.links + 1] = {from = "p" .. i, to = "p" .. j, bandwidth_gbps = 128, latency_ns = 100}
    g.links[#g.links + 1] = {from = "p" .. j, to = "p" .. i, bandwidth_gbps = FREE, latency_ns = 0}
  end
  local torch = T.init{topology = g, timing_only = not values}
  local n_elem = n * C // 2
  local ranks = {}
  for i = 0, n - 1 do ranks[i + 1] = i end
  local t = torch.zeros({1, n * n_elem}, {dtype = "f16", ranks = ranks})
  if values then
    for r = 0, n - 1 do t:shard_write_vec(r, tl.vec_affine(n_elem, 1, r):mod(4)) end
  end
  local algo = ccl.get("ring_rs_ag_allreduce")
  local a = algo.args(n, n_elem, {dtype = "f16"})
  algo.wire(torch.sys, ranks, a)
  local run = tl.launch(torch.sys, ranks, algo.kernel, a, t, t)
  torch.sim:run()
  -- 2 (n-1) (100 ns + 1 ns) + (n-1) ps
  local want_ps = 2 * (n - 1) * (100000 + 1000) + (n - 1)
  local got_ps = math.floor(run:latency_ns() * 1000 + 0.5)
  local exact = kb.check(got_ps == want_ps,
                         ("n=%d: %d ps, the closed form %d ps"):format(n, got_ps, want_ps))
  if values then
    for _, r in ipairs({0, n - 1}) do
      local sh = t:shard_table(r)
      for j = 0, n_elem - 1 do
        local s = 0
        for q = 0, n - 1 do s = s + (q + j) % 4 end
        if sh[j + 1] ~= s then
          exact = kb.check(false, ("rank %d element %d: %s, want %d"):format(r, j, sh[j + 1], s))
          break
        end
      end
    end
  end
  local st = torch.sim:stats()
  local steps = n * 2 * (n - 1)
  return st.activations / steps, st.switches / steps, exact
end

local values = arg[1] == "values"
local act, sw, ok = ring(16, values)
ok = kb.check(act <= ACTIVATIONS,
              ("%.3f activations a step, more than %.1f"):format(act, ACTIVATIONS)) and ok
ok = kb.check(sw <= SWITCHES,
              ("%.3f context switches a step, more than %.1f"):format(sw, SWITCHES)) and ok
if ok then
  print(("ring_step_cost ok: %.3f activations, %.3f switches a step, exact"):format(act, sw))
end
