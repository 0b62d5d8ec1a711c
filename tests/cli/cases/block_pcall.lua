-- A Lua process blocks inside pcall (and an error after the wait is caught
-- by that pcall, not by the kernel).
local kb = require("kbsim")
local sim = kb.sim{}
local r = {}
sim:spawn("p", function()
  local ok, err = pcall(function()
    kb.wait(10)
    r.inside = kb.now()
    error("after the wait")
  end)
  r.ok, r.err, r.after = ok, err, kb.now()
  r.xp = select(2, xpcall(function() kb.wait(5); return kb.now() end, debug.traceback))
end)
sim:spawn("q", function() kb.wait(12); r.q = kb.now() end)
sim:run()
kb.check(r.inside == 10 and r.after == 10, "woke inside pcall at 10 ns")
kb.check(r.ok == false and r.err:find("after the wait", 1, true), "pcall caught the error")
kb.check(r.xp == 15, "xpcall too")
kb.check(r.q == 12, "the other process ran meanwhile")
print("block_pcall ok")
