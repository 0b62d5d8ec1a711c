-- ev_wait_method.lua — ev:wait() is not a method: the error names this line and says how to wait
local kb = require("kbsim")
local sim = kb.sim{}
local ev = sim:event("go")
sim:spawn("waiter", function() ev:wait() end)
sim:run()
