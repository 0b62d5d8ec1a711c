-- A failing kb.check reports file:line and makes kbsim exit 1.
local kb = require("kbsim")
kb.check(true, "fine")
kb.check(1 + 1 == 3, "one plus one is three")
local sim = kb.sim{}
sim:spawn("p", function()
  kb.wait(1)
  kb.check(false, "inside a process")
end)
sim:run()
print("after the checks")
