-- transcendental.lua — pe.math.transcendental_cycles (configs/topology.yaml)
-- sets what tl.exp costs: n f32 elements take ceil(4n / W) vectors of T
-- cycles each, after one PE_CPU dispatch. Run with and without
-- --set pe.math.transcendental_cycles=...; arg[1] is the T expected.
local kb = require("kbsim")
local tl = require("kbsim.tl")
local want_T = tonumber(arg[1])
local function latency(with_exp)
  local sim = kb.sim()
  local sys = kb.system(sim)
  local run = tl.launch(sys, {0}, function()
    local h = tl.full(1024, 1.0, "f32")
    if with_exp then
      local e = tl.exp(h)
      local v = e:to_table()
      kb.check(#v == 1024 and math.abs(v[1024] - math.exp(1)) < 1e-6, "exp value " .. tostring(v[1024]))
    end
  end)
  sim:run()
  return run:latency_ns(), sys
end
local with, sys = latency(true)
local without = latency(false)
local T = sys:config("pe.math.transcendental_cycles")
kb.check(T == want_T, "T = " .. tostring(T) .. ", expected " .. tostring(want_T))
local ghz, W = sys:config("clock_ghz"), sys:config("pe.math.vector_bytes_per_cycle")
local dispatch = sys:config("pe.cpu.dispatch_cycles") / ghz
local want = dispatch + math.ceil(1024 * 4 / W) * T / ghz
kb.check(math.abs((with - without) - want) < 1e-9,
         string.format("exp took %.3f ns, closed form %.3f ns", with - without, want))
print(string.format("transcendental ok: T=%d, exp of 1024 f32 %.1f ns", T, with - without))
