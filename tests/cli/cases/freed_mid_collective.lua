-- freed_mid_collective.lua — simulations stopped in the middle of collectives
-- (kernels blocked in tl.recv, tl.recv_async futures not yet waited, DMA copies
-- and IPCQ messages in flight) and then freed: nothing may leak or be touched
-- after the free (the ASan build runs this; kbsim serve frees its machine so
-- when Ctrl-C stops a collective, cli.cosim_stop_running).
local kb = require("kbsim")
local tl = require("kbsim.tl")
local ccl = require("kbsim.ccl")
local torch = require("kbsim.torch")

local function machine()
  local sim = kb.sim{}
  local sys = kb.system(sim)
  local cfg = kb.ccl_config(nil)
  sys:set_ipcq{buffer_kind = cfg.buffer_kind, backpressure = cfg.backpressure}
  return sim, sys
end

local function tensor(sys, ranks, n)
  local shards = {}
  for _, r in ipairs(ranks) do
    local kind = sys:pe(r).hbm and "hbm" or "tcm"
    shards[r] = {rank = r, addr = tl.alloc(sys, r, kind, n * 4), n = n, kind = kind,
                 dtype = "f32"}
  end
  return {shard = function(_, r) return shards[r] end}
end

-- algorithm name, element count, stop times (ns)
local cases = {
  {"ring_allreduce", 1 << 14, {1, 40, 400}},   -- tl.recv_async futures pending
  {"broadcast", 1 << 14, {1, 40, 400}},        -- kernels blocked in tl.recv
  {"gather", 1 << 12, {30, 300}},
  {"reduce_scatter", 1 << 14, {60}},
}
local stopped = 0
for _, c in ipairs(cases) do
  for _, at in ipairs(c[3]) do
    local sim, sys = machine()
    local ranks = {0, 1, 2, 3}
    local algo = ccl.get(c[1])
    local a = algo.args(#ranks, c[2], {dtype = "f32"})
    torch.wire_once({sys = sys, wired = {}}, algo, ranks, a)
    local n_out = c[1] == "gather" and 4 * c[2] or c[2]
    local n_in = c[1] == "reduce_scatter" and 4 * c[2] or c[2]
    local run = tl.launch(sys, ranks, algo.kernel, a, tensor(sys, ranks, n_in),
                          tensor(sys, ranks, n_out))
    sim:run(at)
    if run:latency_ns() then
      error(("%s ended by %g ns: stop it earlier"):format(c[1], at))
    end
    stopped = stopped + 1
    sim, sys, run = nil, nil, nil -- luacheck: ignore
    collectgarbage()
    collectgarbage()
  end
end
-- and a machine after them runs a collective to its end
local sim, sys = machine()
local algo = ccl.get("ring_allreduce")
local a = algo.args(4, 256, {dtype = "f32"})
torch.wire_once({sys = sys, wired = {}}, algo, {0, 1, 2, 3}, a)
local t = tensor(sys, {0, 1, 2, 3}, 256)
local run = tl.launch(sys, {0, 1, 2, 3}, algo.kernel, a, t, t)
sim:run()
assert(run:latency_ns() > 0)
print(("freed_mid_collective ok: %d simulations freed mid-collective"):format(stopped))
