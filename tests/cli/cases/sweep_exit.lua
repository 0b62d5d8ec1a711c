-- sweep_exit.lua — os.exit in a sweep point fails that point; the sweep and the others' rows go on
local kb = require("kbsim")
local rows, summary = kb.sweep{name = "exit", points = {{a = 1}, {a = 2}, {a = 3}}, run = function(p)
  if p.a == 2 then os.exit(3) end
  return {v = 10 * p.a}
end}
kb.check(rows[1] and rows[1].v == 10 and rows[3] and rows[3].v == 30, "points 1 and 3 kept their rows")
kb.check(rows[2] == nil and summary.failed == 1, "point 2 failed")
-- outside a sweep, os.exit is Lua's own
kb.check(os.exit ~= nil, "os.exit is still there")
print("sweep_exit rows ok")
