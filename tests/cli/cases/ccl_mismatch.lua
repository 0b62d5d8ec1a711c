-- ccl_mismatch.lua — a receive expecting another dtype or length than was sent (exit 2)
--
--   kbsim ccl_mismatch.lua dtype|length [async] [timing]
-- async: tl.recv_async + tl.wait instead of tl.recv; timing: a
-- timing-only system (no payload, no receive buffers)
local kb = require("kbsim")
local tl = require("kbsim.tl")
local what = arg[1] or "dtype"
local async, timing = false, false
for i = 2, #arg do
  if arg[i] == "async" then async = true elseif arg[i] == "timing" then timing = true end
end
local sim = kb.sim{}
local sys = kb.system(sim, {sips = {count = 1}, sip = {cube_mesh = {w = 1, h = 1}}},
                      {timing_only = timing})
tl.wire(sys, 0, "E", 1, "W")
local function recv(n, dt)
  if async then return tl.wait(tl.recv_async("W", n, dt)) end
  return tl.recv("W", n, dt)
end
tl.launch(sys, {0, 1}, function()
  if tl.rank() == 0 then
    tl.send("E", tl.full(8, 1, "f32"))
  elseif what == "dtype" then
    recv(8, "f16")
  else
    recv(6, "f32")
  end
end)
sim:run()
