-- cosim_ref.lua — the collective tests/cli/cosim_test.py runs through `kbsim serve`,
-- run here in one process with kbsim.torch: its simulated times are the reference.
--   kbsim cosim_ref.lua collective=all_reduce|all_gather|reduce_scatter|broadcast ranks=N n=ELEMS
--                       algorithm=NAME dtype=f32 [src=RANK]
local tl = require("kbsim.tl")
local a = {}
for _, s in ipairs{...} do
  local k, v = s:match("^([%w_]+)=(.*)$")
  a[k] = v
end
local N, n, dt, algo = tonumber(a.ranks), tonumber(a.n), a.dtype or "f32", a.algorithm
local torch = require("kbsim.torch").init()
-- the group is ranks 0..N-1: the world size of the group's algorithm
local world = a.collective == "all_reduce" and algo or "ring_allreduce"
local cfg = {ccl = {algorithm = world, algorithms = {[world] = {world_size = N}}}}
torch.distributed.init_process_group{config = cfg}
local t = torch.zeros({n}, {dtype = dt, placement = "replicate"})
for r = 0, N - 1 do t:shard_write_vec(r, tl.vec_affine(n, 1, r)) end
local rep
if a.collective == "all_reduce" then
  rep = torch.distributed.all_reduce(t, {algorithm = algo})
elseif a.collective == "reduce_scatter" then
  local out = torch.zeros({n // N}, {dtype = dt, placement = "replicate"})
  rep = torch.distributed.reduce_scatter(out, t, {algorithm = algo})
elseif a.collective == "all_gather" then
  local out = torch.zeros({N * n}, {dtype = dt, placement = "replicate"})
  rep = torch.distributed.all_gather(out, t, {algorithm = algo})
else
  rep = torch.distributed.broadcast(t, tonumber(a.src), {algorithm = algo})
end
print(("check=%s"):format(rep.check))
print(("latency_ns=%.17g"):format(rep.latency_ns))
for r = 0, N - 1 do print(("exec_ns.%d=%.17g"):format(r, rep.per_rank_ns[r])) end
