-- call_forms.lua — a method called with a dot, a module function called with a colon, a
-- name that is not a method: each error names the script's line and the form to use
-- (they were "attempt to call a nil value", "calling 'wait' on bad self", and kb:check(false)
-- passed silently)
local kb = require("kbsim")
local sim = kb.sim{}
local ev = sim:event("go")
local sig = sim:signal("s", 0)
local f = sim:fifo("f", 2)

local function fails(want, fn, ...)
  local ok, err = pcall(fn, ...)
  if ok or not tostring(err):find(want, 1, true) then
    error(("expected an error with %q, got %s"):format(want, tostring(err)), 2)
  end
end
local here = "call_forms.lua:"
fails(here .. "19: an event has no method or field 'wait' (its methods: cancel, name, notify); to wait: kb.wait(ev)",
      function() ev:wait() end)
fails(here .. "20: an event has no method or field 'wait'", function() ev.wait() end)
fails(here .. "22: a signal has no method or field 'wait' (its methods: changed, read, write); to wait for a change: kb.wait(sig:changed())",
      function() sig:wait() end)
fails(here .. "23: a simulation has no method or field 'wiat' (its methods: close,", function() sim:wiat() end)
fails("bad argument #1 to 'notify' (kbsim.event expected, got number): 'notify' is a method of an event, called with a colon: ev:notify(...)",
      function() ev.notify(5) end)
fails("bad argument #1 to 'read' (kbsim.fifo expected, got no value): 'read' is a method of a fifo, called with a colon: f:read(...)",
      function() f.read() end)
fails("bad argument #1 to 'run' (kbsim.sim expected, got kbsim.event): 'run' is a method of a simulation",
      function() sim.run(ev) end)
fails(here .. "31: kb.check is a function, not a method: call it with a dot, kb.check(...), not with a colon",
      function() kb:check(false, "never passes silently") end)
fails(here .. "32: kb.sim is a function, not a method", function() kb:sim{} end)
-- kb:sweep{...} said "unknown field 'next_trigger'" (a field of the module)
fails("kb.sweep is a function, not a method: call it with a dot, kb.sweep(...)",
      function() kb:sweep{points = {{n = 1}}, run = function() return {} end} end)
fails("kb.system is a function, not a method", function() kb:system(sim) end)
local msgs = {}
sim:spawn("p", function()
  for _, fn in ipairs{function() kb:wait(ev) end, function() kb:wait_any({ev}, 1) end,
                      function() ev:wait() end, function() kb.wait(nil) end} do
    local _, err = pcall(fn); msgs[#msgs + 1] = err
  end
end)
sim:run()
kb.check(msgs[1]:find(here .. "39: kb.wait is a function, not a method: call it with a dot, kb.wait(...)", 1, true), msgs[1])
kb.check(msgs[2]:find(here .. "39: kb.wait_any is a function, not a method", 1, true), msgs[2])
kb.check(msgs[3]:find(here .. "40: an event has no method or field 'wait'", 1, true), msgs[3])
kb.check(msgs[4]:find(here .. "40: bad argument #1 to 'wait' (number or event expected, got nil)", 1, true), msgs[4])
kb.check(kb.checks_failed() == 0, "no check failed")
print("call_forms ok")
