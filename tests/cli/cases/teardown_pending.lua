-- teardown_pending.lua — a simulation stopped with a receive posted and a DMA copy in service
-- frees both when the script ends (LeakSanitizer found them lost; run under the ASan build)
local kb = require("kbsim")
local tl = require("kbsim.tl")
local sim = kb.sim{}
local sys = kb.system(sim, {sips = {count = 1}, sip = {cube_mesh = {w = 2, h = 1}}})
tl.wire(sys, 0, "E", 1, "W")
tl.wire(sys, 1, "E", 0, "W")
tl.launch(sys, {0}, function()
  tl.recv_async("W", 4, "f32") -- nobody sends it: never done
end)
sim:spawn("copier", function() -- its copy is in service when the run stops
  sys:dma(0, 1, 1 << 20, {src = "hbm", dst = "hbm"})
end)
kb.check(sim:run(100) == "until", "the run stops at 100 ns")
print("teardown_pending ok")
