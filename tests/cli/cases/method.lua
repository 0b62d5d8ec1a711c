-- Method processes: static sensitivity, dont_initialize, next_trigger.
local kb = require("kbsim")
local sim = kb.sim{}
local clk = sim:event("clk")
local ticks, runs = {}, 0
sim:method("counter", function() ticks[#ticks + 1] = kb.now() end,
           {sensitive = {clk}, dont_initialize = true})
sim:method("self_timer", function()
  runs = runs + 1
  if runs < 4 then kb.next_trigger(5) end
end)
sim:spawn("clock", function()
  for _ = 1, 3 do kb.wait(10); clk:notify() end
end)
sim:run()
kb.check(table.concat(ticks, ",") == "10.0,20.0,30.0", "counter ran at " .. table.concat(ticks, ","))
kb.check(runs == 4, ("self_timer ran %d times"):format(runs))
-- blocking is not allowed in a method
local s2 = kb.sim{}
s2:method("blocker", function() kb.wait(1) end)
local ok, err = pcall(s2.run, s2)
kb.check(not ok and err:find("kb.wait called outside a thread process", 1, true), tostring(err))
kb.check(err:find("process 'blocker' failed", 1, true), "method failure names the process")
print("method ok")
