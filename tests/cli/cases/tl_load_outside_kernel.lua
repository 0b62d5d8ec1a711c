-- tl.load of a kbsim.torch tensor outside a kernel names tl.load (the
-- tensor's places record was looked up under tl.program_id's name)
local T = require("kbsim.torch")
local tl = require("kbsim.tl")
local torch = T.init{topology = {sips = {count = 1}}}
local t = torch.zeros({1, 64}, {dtype = "f16", ranks = {0}})
tl.load(t)
