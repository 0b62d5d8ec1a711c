-- The default grid with the VC count of --set below what its routing needs
-- is refused when the system is built, naming --set.
local kb = require("kbsim")
local sim <close> = kb.sim{}
kb.system(sim)
print("built")
