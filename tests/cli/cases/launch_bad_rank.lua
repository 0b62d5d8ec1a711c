-- tl.launch with a rank the system does not have blames the script's
-- line and says which entry of ranks is wrong.
local kb = require("kbsim")
local tl = require("kbsim.tl")
local sim <close> = kb.sim{}
local sys = kb.system(sim)
tl.launch(sys, {0, 1, 256}, function() end)
print("not reached")
