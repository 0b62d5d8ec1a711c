-- tl.spawn: a kernel that returns before its helper starts fails the run
-- with the line of the tl.spawn call (not tl.lua's) and what to do.
local kb = require("kbsim")
local tl = require("kbsim.tl")
local sim = kb.sim{}
local sys = kb.system(sim)
tl.launch(sys, {0}, function()
  tl.spawn("late", function() end)
end)
sim:run()
