-- ctrl_c.lua — for tests, inside a kb.sweep point: sends Ctrl-C (SIGINT),
-- or the signal named (ctrl_c("TERM")), to kbsim and keeps the point busy
-- until kbsim interrupts it (at most 10 s).
return function(signal)
  local kb = require("kbsim")
  -- popen, not os.execute: system() ignores SIGINT while it waits.
  io.popen("kill -" .. (signal or "INT") .. " $PPID"):close()
  local sim <close> = kb.sim{}
  local t0 = kb.clock()
  sim:spawn("spin", function() while kb.clock() - t0 < 10 do kb.wait(1) end end)
  sim:run()
end
