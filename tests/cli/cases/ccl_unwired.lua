-- ccl_unwired.lua — a kernel receiving on a direction nobody wired: the error names the PE and the direction (exit 2)
local kb = require("kbsim")
local tl = require("kbsim.tl")
local sim = kb.sim{}
local sys = kb.system(sim, {sips = {count = 1}, sip = {cube_mesh = {w = 1, h = 1}}})
tl.wire(sys, 0, "E", 1, "W")
tl.launch(sys, {0, 1}, function()
  if tl.rank() == 0 then
    tl.send("E", tl.full(4, 1, "f32"))
  else
    tl.recv("child_left", 4, "f32")
  end
end)
sim:run()
