-- cosim_ref.lua — bench/cosim_rtt.py's reference: one all_reduce launched from Lua in
-- one process, its wall time around the call (kb.clock), values not checked.
--   kbsim bench/cosim_ref.lua ranks=8 n=262144 algorithm=ring_allreduce
local kb = require("kbsim")
local a = {}
for _, s in ipairs{...} do
  local k, v = s:match("^([%w_]+)=(.*)$")
  a[k] = v
end
local N, n, algo = tonumber(a.ranks), tonumber(a.n), a.algorithm
local torch = require("kbsim.torch").init()
torch.distributed.init_process_group{
  config = {ccl = {algorithm = algo, algorithms = {[algo] = {world_size = N}}}}}
local t = torch.zeros({n}, {dtype = "f32", placement = "replicate"})
local t0 = kb.clock()
local rep = torch.distributed.all_reduce(t, {algorithm = algo, check = false})
local t1 = kb.clock()
print(("wall_s=%.6f latency_ns=%.17g"):format(t1 - t0, rep.latency_ns))
