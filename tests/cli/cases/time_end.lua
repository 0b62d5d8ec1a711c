-- Simulated time ends at 2^63-1 ps: a wait, timeout or notification past
-- it is an error naming the process, and time never runs backwards.
local kb = require("kbsim")
local sim <close> = kb.sim{}
local ev = sim:event("e")
local errs = {}
sim:spawn("sleeper", function()
  kb.wait(9.2e15)
  kb.wait(9.2e15)  -- would wrap: refused
end)
local ok, err = pcall(sim.run, sim)
assert(not ok and err:find("kb.wait: process 'sleeper': a wait of 9200000000000000 ns at 9200000000000000 ns " ..
                           "would pass the end of simulated time (9223372036854775.807 ns)", 1, true), err)
assert(sim:now_ps() == 9200000000000000000, sim:now_ps())
local function refused(f, ...)
  local ok2, e = pcall(f, ...)
  assert(not ok2, "expected an error")
  errs[#errs + 1] = e
end
local sim2 <close> = kb.sim{}
local ev2 = sim2:event("e2")
sim2:spawn("p", function()
  kb.wait(9223372036854775)
  refused(kb.wait, 1)
  refused(ev2.notify, ev2, 1)
  refused(kb.wait_any, {ev2}, 1)
  refused(kb.wait, 9223372036854776) -- past the end even from time 0
  kb.wait(0.807)                   -- the last picosecond is reachable
end)
assert(sim2:run() == "done")
assert(sim2:now_ps() == 9223372036854775807 and sim2:now_ps() > 0)
assert(errs[1]:find("kb.wait: process 'p': a wait of 1 ns", 1, true), errs[1])
assert(errs[2]:find("ev:notify: process 'p': a notification of 1 ns", 1, true), errs[2])
assert(errs[3]:find("kb.wait_any: process 'p': a timeout of 1 ns", 1, true), errs[3])
assert(errs[4]:find("time past the end of simulated time", 1, true), errs[4])
print("time_end ok")
