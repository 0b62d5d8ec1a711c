-- ccl_mismatch.lua — a receive expecting another dtype or length than was sent (exit 2)
local kb = require("kbsim")
local tl = require("kbsim.tl")
local what = arg[1] or "dtype"
local sim = kb.sim{}
local sys = kb.system(sim, {sips = {count = 1}, sip = {cube_mesh = {w = 1, h = 1}}})
tl.wire(sys, 0, "E", 1, "W")
tl.launch(sys, {0, 1}, function()
  if tl.rank() == 0 then
    tl.send("E", tl.full(8, 1, "f32"))
  elseif what == "dtype" then
    tl.recv("W", 8, "f16")
  else
    tl.recv("W", 6, "f32")
  end
end)
sim:run()
