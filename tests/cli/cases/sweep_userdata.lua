-- kb.sweep: an upvalue that cannot travel to a point's Lua state is an
-- error naming it.
local kb = require("kbsim")
local sim = kb.sim{}
kb.sweep{name = "bad", points = {{n = 1}}, run = function(p)
  sim:spawn("w", function() kb.wait(p.n) end)
  return {}
end}
print("not reached")
