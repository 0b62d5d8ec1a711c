-- Wiring two PEs that no route joins names the missing way, not the
-- credit path back (tests/cli/cases/graph_apart.yaml).
local kb = require("kbsim")
local tl = require("kbsim.tl")
local sim <close> = kb.sim{}
local sys = kb.system(sim)
tl.wire(sys, 0, "E", 1, "W")
print("not reached")
