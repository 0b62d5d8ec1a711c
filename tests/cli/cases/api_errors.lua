-- Misuse raises errors with clear messages instead of crashing.
local kb = require("kbsim")
local function fails(pat, f, ...)
  local ok, err = pcall(f, ...)
  kb.check(not ok and tostring(err):find(pat, 1, true), ("want error %q, got %s"):format(pat, tostring(err)))
end
fails("kb.wait called outside a thread process", kb.wait, 1)
fails("kb.next_trigger called outside a method process", kb.next_trigger, 1)
fails("kb.now called outside a running simulation", kb.now)
fails("kb.sim: unknown option 'stack_sise' (stack_size, guard, trace)", kb.sim, {stack_sise = 65536})
fails("bad 'stack_size' (positive integer expected)", kb.sim, {stack_size = -1})
fails("kb.system: unknown option 'timing_onyl' (timing_only)", kb.system, kb.sim{}, nil, {timing_onyl = true})
local sim = kb.sim{}
local ev = sim:event("e")
fails("bad argument #1 to 'notify' (time must be a finite non-negative number of ns)", function() ev:notify(-1) end)
fails("time must be a finite non-negative number", ev.notify, ev, 0/0)
fails("time must be a finite non-negative number", ev.notify, ev, math.huge)
fails("bad argument #1 to 'run'", function() sim:run(-5) end)
fails("capacity must be positive", sim.fifo, sim, "f", 0)
-- a method called on something that is not its own kind of handle
local fifo1 = sim:fifo("f1", 1)
fails("(kbsim.fifo expected, got number)", fifo1.nb_write, 42, 1)
fails("(kbsim.fifo expected, got kbsim.event)", fifo1.nb_read, ev)
fails("(kbsim.event expected, got kbsim.fifo)", ev.notify, fifo1)
fails("(kbsim.fifo expected, got table)", fifo1.available, {})
kb.check(fifo1:nb_write(7) and fifo1:free() == 0, "fifo methods on the right handle")
local other = kb.sim{}
local oev = other:event("o")
sim:spawn("x", function()
  fails("event belongs to another simulation", kb.wait, oev)
  fails("bad argument #1 to 'wait' (number or event expected", function() kb.wait("soon") end)
  fails("attempt to close a running simulation", sim.close, sim)
  fails("simulation is already running", sim.run, sim)
end)
sim:run()
-- a closed simulation and its handles refuse to work
local f = sim:fifo("f", 1)
sim:close()
fails("attempt to use a closed simulation", sim.run, sim)
fails("attempt to use a closed simulation", ev.notify, ev)
fails("attempt to use a closed simulation", f.nb_write, f, 1)
kb.check(tostring(sim) == "simulation (closed)", tostring(sim))
do
  local s <close> = kb.sim{guard = false, stack_size = 128 * 1024}
  s:spawn("y", function() kb.wait(1) end)
  s:run(0.5)   -- leave it blocked; <close> frees it
end
collectgarbage()
print("api_errors ok")
