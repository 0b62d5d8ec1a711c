-- system_close_open_sim.lua — sys:close() while its simulation is open: the system is hidden at
-- once and freed with the simulation (its PE units' processes ran on freed memory)
local kb = require("kbsim")
local tl = require("kbsim.tl")
local sim = kb.sim{}
local sys = kb.system(sim, {sips = {count = 1}, sip = {cube_mesh = {w = 2, h = 1}}})
tl.wired(sys, 0, "E", true) -- makes PE 0's units, whose DMA channels are processes of sim
sys:close()
kb.check(tostring(sys) == "system (closed)", "the system reads as closed")
local ok, err = pcall(sys.counts, sys)
kb.check(not ok and err:find("closed system", 1, true), "a closed system refuses use")
sim:spawn("after", function() kb.wait(10) end)
kb.check(sim:run() == "done", "the simulation runs on")
sim:close()
collectgarbage()
print("system_close_open_sim ok")
