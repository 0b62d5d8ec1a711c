-- describe_sweep_only.lua — a script whose only systems are kb.sweep points':
-- kbsim --describe lists none of them and says why (exit 2).
local kb = require("kbsim")
local _, summary = kb.sweep{name = "describe_sweep_only", points = {{a = 1}, {a = 2}},
  run = function(p)
    local kb = require("kbsim")
    kb.system(kb.sim())
    return {x = p.a}
  end}
print("sweep of " .. #summary.points .. " points ran")
