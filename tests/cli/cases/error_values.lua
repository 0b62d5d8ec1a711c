-- error_values.lua — a sweep point, a process and the script raising values
-- that are not strings: each is reported at the line that raised it, with
-- what is known of the value (its fields sorted by key, so -j does not
-- change the message)
local kb = require("kbsim")
local what = arg[1]
if what == "sweep" then
  local rows = kb.sweep{name = "errs", points = {{n = 1}, {n = 2}, {n = 3}}, run = function(p)
    if p.n == 2 then error({why = "bad n", code = 7, nested = {1}}) end
    return {n = p.n}
  end}
  kb.check(#rows == 2, "the two other points' rows are kept")
  print("rows " .. #rows)
elseif what == "process" then
  local sim <close> = kb.sim{}
  sim:spawn("w", function() kb.wait(1); error(setmetatable({}, {__tostring = function() return "my error" end})) end)
  sim:run()
elseif what == "yield" then
  -- Lua's own message had no place
  local sim <close> = kb.sim{}
  sim:spawn("y", function() kb.wait(1); coroutine.yield() end)
  sim:run()
else
  error(42)
end
