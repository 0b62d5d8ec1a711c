-- Deadlock: nothing pending, processes blocked; the report lists them and
-- what they wait on.
local kb = require("kbsim")
local sim = kb.sim{}
local empty = sim:fifo("empty", 1)
local never = sim:event("never")
sim:spawn("consumer", function() empty:read() end)
sim:spawn("sleeper", function() kb.wait(5); kb.wait(never) end)
sim:spawn("fine", function() kb.wait(3) end)
local ok = true
-- keep the error's location on this line
if ok then
  sim:run()
end
