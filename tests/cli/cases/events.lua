-- Immediate, delta and timed notification from Lua; cancel; wait_any.
local kb = require("kbsim")
local sim = kb.sim{}
local ev = sim:event("ev")
local woke = {}
local function deltas() return sim:stats().deltas end

-- immediate: the waiter runs at the same time, in the same delta
sim:spawn("w_imm", function()
  kb.wait(ev)
  woke.imm = {kb.now(), deltas()}
end)
sim:spawn("n_imm", function()
  kb.wait(10)
  woke.imm_at = {kb.now(), deltas()}
  ev:notify()
end)
sim:run()
kb.check(woke.imm[1] == 10, "immediate wakes at 10 ns")
kb.check(woke.imm[2] == woke.imm_at[2], "immediate wakes in the same delta")

-- delta: same time, next delta
local ev2 = sim:event("ev2")
sim:spawn("w_delta", function()
  kb.wait(ev2)
  woke.delta = {kb.now(), deltas()}
end)
sim:spawn("n_delta", function()
  kb.wait(5)
  woke.delta_at = {kb.now(), deltas()}
  ev2:notify(0)
end)
sim:run()
kb.check(woke.delta[1] == 15, ("delta wakes at 15 ns, got %g"):format(woke.delta[1]))
kb.check(woke.delta[2] == woke.delta_at[2] + 1, "delta wakes one delta later")

-- timed, notified from the main script before the run
local ev3 = sim:event("ev3")
sim:spawn("w_timed", function() kb.wait(ev3); woke.timed = kb.now() end)
ev3:notify(7.5)
sim:run()
kb.check(woke.timed == 22.5, ("timed wakes at 22.5 ns, got %s"):format(woke.timed))

-- cancel, and wait_any with a timeout
local ev4, ev5 = sim:event("ev4"), sim:event("ev5")
sim:spawn("w_any", function()
  woke.any1 = kb.wait_any({ev4, ev5}, 100)
  woke.any1_t = kb.now()
  woke.any2 = kb.wait_any({ev4, ev5}, 100)
  woke.any2_t = kb.now()
end)
sim:spawn("n_any", function()
  ev4:notify(3)
  ev4:cancel()
  ev5:notify(4)
end)
sim:run()
kb.check(woke.any1 == 2 and woke.any1_t == 26.5, ("wait_any -> ev5 at 26.5, got %s at %s"):format(woke.any1, woke.any1_t))
kb.check(woke.any2 == nil and woke.any2_t == 126.5, "wait_any times out")
kb.check(ev:name() == "ev" and tostring(ev) == "event 'ev'", "event name")
print("events ok")
