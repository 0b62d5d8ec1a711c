-- tl_timing_only.lua — a timing-only system gives the same times as one with payload, and no values
local kb = require("kbsim")
local T = require("kbsim.torch")
local tl = require("kbsim.tl")

local function run(timing_only)
  local torch = T.init{topology = {sips = {count = 1}, sip = {cube_mesh = {w = 2, h = 2}}},
                       timing_only = timing_only}
  local D = torch.distributed
  D.init_process_group{backend = "ahbm", config = {ccl = {algorithm = "ring_rs_ag_allreduce",
    algorithms = {ring_rs_ag_allreduce = {world_size = 8}}}}}
  local t = torch.zeros({1, 8 * 4096}, {dtype = "f16"})
  for k, r in ipairs(D.get_ranks()) do t:shard_write_vec(r, tl.vec_new(4096, k)) end
  local rep = D.all_reduce(t, {check = not timing_only})
  return rep, t:shard_vec(D.get_ranks()[1]):max_abs()
end

local full, full_max = run(false)
local timing, timing_max = run(true)
kb.check(full.check == "passed", "the run with payload checks its values")
kb.check(full.latency_ns == timing.latency_ns,
         ("same latency: %.3f vs %.3f ns"):format(full.latency_ns, timing.latency_ns))
for r, ns in pairs(full.per_rank_ns) do
  kb.check(timing.per_rank_ns[r] == ns, ("rank %d: same kernel time"):format(r))
end
kb.check(full_max == 36 and timing_max == 0, ("values only with payload: %g and %g")
  :format(full_max, timing_max))

-- A kernel of the computing calls (dot, gemm_tile, accumulate, cast, math)
-- takes the same time with and without values.
local function kernel_time(timing_only)
  local sim = kb.sim{}
  local sys = kb.system(sim, {sips = {count = 1}, sip = {cube_mesh = {w = 1, h = 1}}},
                        {timing_only = timing_only})
  local addr = tl.alloc(sys, 0, "hbm", 64 * 4)
  if not timing_only then tl.vec_affine(64, 1, 0):write(sys, 0, addr, "f32") end
  local x = {}
  function x:shard() return {addr = addr, n = 64, kind = "hbm", dtype = "f32"} end
  local sum
  local run = tl.launch(sys, {0}, function()
    local a = tl.load(x, 0, 64)
    local d = tl.dot(a, a, 8, 8, 8)
    local acc = tl.gemm_tile(nil, a, 0, a, 0, 8, 8, 8)
    tl.accumulate(acc, d)
    local h = tl.cast(tl.add(acc, 1), "bf16")
    sum = tl.sum(h)
  end)
  sim:run()
  return run:times()[0].exec_ns, sum
end
local t_full, sum_full = kernel_time(false)
local t_timing, sum_timing = kernel_time(true)
kb.check(t_full > 0 and t_full == t_timing,
         ("compute kernel: same time %.3f vs %.3f ns"):format(t_full, t_timing))
kb.check(sum_full ~= nil and sum_timing ~= nil, "both kernels ran to the end")
-- Large tensors cost no host memory of their size: torch.zeros writes its
-- zeros a bounded piece at a time (host vectors are Lua userdata, so they
-- show in collectgarbage's count; the collector is stopped to see them)
do
  local torch = T.init{topology = {sips = {count = 1}, sip = {cube_mesh = {w = 1, h = 1}}},
                       timing_only = true}
  collectgarbage("collect")
  collectgarbage("stop")
  local before = collectgarbage("count")
  local t = torch.zeros({1, 64 * 1024 * 1024}) -- 64 Mi f32 over the cube's 8 PEs: 256 MiB
  local grew_kib = collectgarbage("count") - before
  collectgarbage("restart")
  kb.check(t.shard_n * #t.ranks == 64 * 1024 * 1024, "64 Mi elements in all")
  kb.check(grew_kib < 4096, ("torch.zeros of 256 MiB took %.0f KiB of host memory"):format(grew_kib))
end
print(("tl_timing_only ok: %.1f ns"):format(full.latency_ns))
