-- tl_errors.lua — a recv on a direction that is not wired names the PE and the direction
local kb = require("kbsim")
local tl = require("kbsim.tl")
local sim = kb.sim{}
local sys = kb.system(sim, {sips = {count = 1}, sip = {cube_mesh = {w = 1, h = 1}}})
local mode = arg[1]
tl.wire(sys, 0, "E", 1, "W")
tl.launch(sys, {0, 1}, function()
  if mode == "unwired" and tl.rank() == 1 then
    tl.recv("N", 4, "f32")
  elseif mode == "mismatch" then
    if tl.rank() == 0 then tl.send("E", tl.full(8, 1, "f16")) else tl.recv("W", 4, "f32") end
  elseif mode == "outside" then
    return
  end
end)
if mode == "outside" then tl.rank() end
sim:run()
