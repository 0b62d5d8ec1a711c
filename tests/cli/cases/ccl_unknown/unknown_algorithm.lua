-- unknown_algorithm.lua — ccl.yaml in the working directory names an algorithm that does not exist (exit 2)
local T = require("kbsim.torch")
local torch = T.init{topology = {sips = {count = 1}, sip = {cube_mesh = {w = 1, h = 1}}}}
torch.distributed.init_process_group{backend = "ahbm"}
