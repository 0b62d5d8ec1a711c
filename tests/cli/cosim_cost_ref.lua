-- cosim_cost_ref.lua — the closed forms kbsim.torch.costing charges, from Lua:
-- prints gemm_ps=, add_ps=, maximum_ps=, copy_ps= for the shapes of cosim_torch_test.py's costing case
local kb = require("kbsim")
local tl = require("kbsim.tl")
local sys = kb.system(kb.sim{})
print(("gemm_ps=%d"):format(tl.gemm_time(sys, 4, 32, 64, 1)))
print(("linear_gemm_ps=%d"):format(tl.gemm_time(sys, 4, 16, 64, 1)))
print(("add_ps=%d"):format(tl.math_time(sys, "add", 64, "f32", 1)))
print(("maximum_ps=%d"):format(tl.math_time(sys, "maximum", 64, "f32", 1)))
print(("copy_ps=%d"):format(tl.copy_time(sys, 4096, nil, nil, 1)))
