-- ccl_spawn.lua — torch.multiprocessing.spawn: DDP-style workers meeting in collectives; a failing worker names its rank (exit 2)
local kb = require("kbsim")
local T = require("kbsim.torch")

local N, C = 4, 8
local torch = T.init{topology = {sips = {count = 1}, sip = {cube_mesh = {w = 1, h = 1}}}}
local D = torch.distributed
D.init_process_group{backend = "ahbm", config = {ccl = {algorithm = "ring_allreduce", dtype = "f32",
  algorithms = {ring_allreduce = {world_size = N}}}}}
local t = torch.zeros({1, N * C}, {dtype = "f32"})

local seen, reports = {}, {}
local function worker(rank, nprocs)
  seen[#seen + 1] = D.get_rank()
  -- each rank writes its own shard, as a DDP process fills its gradient
  local v = {}
  for i = 1, C do v[i] = rank + 1 end
  t:shard_copy_(D.get_ranks()[rank + 1], v)
  D.barrier()
  reports[rank] = D.all_reduce(t)
  kb.check(nprocs == N, "nprocs")
end
torch.multiprocessing.spawn(worker, N)
kb.check(#seen == N and seen[1] == 0 and seen[N] == N - 1, "get_rank inside spawn")
for r = 0, N - 1 do
  kb.check(reports[r] and reports[r] == reports[0], ("rank %d has the shared report"):format(r))
end
kb.check(reports[0].check == "passed", "all_reduce in spawn: " .. reports[0].check)
for _, x in ipairs(t:to_table()) do
  if x ~= N * (N + 1) / 2 then kb.check(false, "sum " .. x) break end
end
print(("spawn all_reduce %.1f ns"):format(reports[0].latency_ns))
print("ccl_spawn ok")

-- rank 2 fails after the others reached a barrier
torch.multiprocessing.spawn(function(rank)
  if rank == 2 then error("bad shard " .. rank) end
  D.barrier()
end, N)
