-- ccl_deadlock.lua — sends that are never matched: the deadlock report names the blocked PEs and directions (exit 2)
--
-- Both PEs send a tile longer than the 4-slot ring to each other before
-- receiving: each waits for a credit the other never returns.
local kb = require("kbsim")
local tl = require("kbsim.tl")
local sim = kb.sim{}
local sys = kb.system(sim, {sips = {count = 1}, sip = {cube_mesh = {w = 1, h = 1}}})
tl.wire(sys, 0, "E", 1, "W")
tl.wire(sys, 1, "W", 0, "E")
tl.launch(sys, {0, 1}, function()
  local dir = tl.rank() == 0 and "E" or "W"
  tl.send(dir, tl.full(8192, 1, "f32")) -- 32 KiB: 8 slots of 4 KiB
  tl.recv(dir, 8192, "f32")
end)
sim:run()
