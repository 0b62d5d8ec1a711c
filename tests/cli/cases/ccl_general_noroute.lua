-- ccl_general_noroute.lua — a ring all-reduce on a graph with no way back: the error names this line (exit 2)
local T = require("kbsim.torch")
local torch = T.init{topology = {nodes = {{name = "a", pe = true}, {name = "b", pe = true}},
  links = {{from = "a", to = "b", bandwidth_gbps = 64, latency_ns = 10}}}}
torch.distributed.init_process_group{config = {ccl = {algorithm = "ring_allreduce", dtype = "f32"}}}
torch.distributed.all_reduce(torch.zeros({1, 4}))
print("not reached")
