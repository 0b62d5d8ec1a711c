-- metatables_hidden.lua — scripts cannot reach the metatables of kbsim objects: getmetatable gives
-- the type name, so __gc cannot be called on a live object (getmetatable(sys).__gc(sys) freed
-- a system its simulation still ran; found by the API fuzzer)
local kb = require("kbsim")
local tl = require("kbsim.tl")
local sim = kb.sim{}
local sys = kb.system(sim, {sips = {count = 1}, sip = {cube_mesh = {w = 2, h = 1}}})
local objects = {["kbsim.sim"] = sim, ["kbsim.system"] = sys, ["kbsim.event"] = sim:event("e"),
                 ["kbsim.fifo"] = sim:fifo("f", 2), ["kbsim.signal"] = sim:signal("s", 0),
                 ["kbsim.vec"] = tl.vec_new(2)}
tl.wire(sys, 1, "E", 0, "W")
tl.launch(sys, {0, 1}, function()
  if tl.rank() == 1 then tl.send("E", tl.full(1, 1, "f32")); return end
  objects["kbsim.handle"] = tl.full(4, 1, "f32")
  objects["kbsim.future"] = tl.recv_async("W", 1, "f32")
  kb.check(getmetatable(objects["kbsim.handle"]) == "kbsim.handle", "a handle's metatable")
  kb.check(getmetatable(objects["kbsim.future"]) == "kbsim.future", "a future's metatable")
  tl.wait(objects["kbsim.future"])
end)
objects["kbsim.proc"] = sim:spawn("p", function() end)
sim:run()
local n = 0
for tname, obj in pairs(objects) do
  n = n + 1
  kb.check(getmetatable(obj) == tname, tname .. ": getmetatable gives the type name")
  kb.check(not pcall(function() return getmetatable(obj).__gc(obj) end),
           tname .. ": no __gc to call")
end
kb.check(n == 9, "every type was tried")
kb.check(sys:counts().pes == 16, "the system is still there")
tl.launch(sys, {0}, function() tl.store({shard = function() return {addr = tl.alloc(sys, 0,
  "hbm", 64), n = 4, kind = "hbm", dtype = "f32"} end}, 0, tl.full(4, 2, "f32")) end)
kb.check(sim:run() == "done", "and runs kernels, tl.store's handle check included")
print("metatables_hidden ok")
