-- A runtime error in a spawned process ends the run with its message,
-- traceback and process name.
local kb = require("kbsim")
local function check_token(t)
  kb.wait(1)
  if t == 7 then error("bad token " .. t) end
end
local sim = kb.sim{}
for i = 1, 9 do
  sim:spawn("worker." .. i, function() check_token(i) end)
end
sim:run()
print("not reached")
