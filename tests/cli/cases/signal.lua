-- A signal holds a Lua number; writes commit in the update phase.
local kb = require("kbsim")
local sim = kb.sim{}
local sig = sim:signal("level", 1.5)
local seen = {}
kb.check(sig:read() == 1.5, "initial value")
sim:spawn("watch", function()
  for _ = 1, 2 do
    kb.wait(sig:changed())
    seen[#seen + 1] = ("%s@%g"):format(sig:read(), kb.now())
  end
end)
sim:spawn("drive", function()
  kb.wait(10)
  sig:write(7)
  seen.same_delta = sig:read()
  kb.wait(10)
  sig:write(7)         -- no change: no event
  kb.wait(10)
  sig:write(-0.25)
end)
sim:run()
kb.check(seen.same_delta == 1.5, "old value until the update phase")
kb.check(seen[1] == "7@10" and seen[2] == "-0.25@30", ("changes seen: %s %s"):format(seen[1], seen[2]))
kb.check(math.type(sig:read()) == "float", "float stays float")
local s0 = sim:signal("zero")
kb.check(s0:read() == 0 and math.type(s0:read()) == "integer", "default initial 0")
kb.check(tostring(sig) == "signal 'level'", tostring(sig))
print("signal ok")
