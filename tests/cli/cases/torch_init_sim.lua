-- torch_init_sim.lua — torch.init passes kb.sim's options (guard,
-- stack_size) to its simulation; a bad one names the caller's line
local kb = require("kbsim")
local T = require("kbsim.torch")

-- the stack bytes of one running thread process of torch.init(o)'s simulation
local function stack_of(o)
  o.topology = {sips = {count = 1}, sip = {cube_mesh = {w = 1, h = 1}}}
  local torch = T.init(o)
  local got
  torch.sim:spawn("probe", function() got = torch.sim:stats().stack_bytes end)
  torch.sim:run()
  return got
end
local default, big = stack_of{}, stack_of{stack_size = 1 << 20, guard = false}
kb.check(default < 1 << 20 and big >= 1 << 20, ("stacks: %d by default, %d asked 1 MiB")
  :format(default, big))

local line = debug.getinfo(1, "l").currentline + 1
local ok, e = pcall(function() T.init{stack_size = -1} end)
kb.check(not ok and e == ("torch_init_sim.lua:%d: torch.init: bad 'stack_size' (positive "
  .. "integer expected)"):format(line), tostring(e))
print("torch_init_sim ok")
