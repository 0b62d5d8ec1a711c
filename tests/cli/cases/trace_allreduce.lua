-- trace_allreduce.lua — a small all-reduce to trace (tests/cli/trace.sh)
--
-- Without arguments: a ring all-reduce of 4 x 64 f32 on one SIP of 2x2
-- cubes, then a tree all-reduce in a second simulation (which --trace must
-- leave out). With "sweep": the same ring all-reduce as a kb.sweep of 3
-- points of different sizes (--trace-point picks one). With "small": the
-- ring all-reduce on rings of 2 slots of 64 bytes, so that a message takes
-- 4 slots and the rings fill (the occupancy counter's test).
local kb = require("kbsim")
local T = require("kbsim.torch")

local function allreduce(alg, per_rank, ipcq)
  local torch = T.init{topology = {sips = {count = 1}, sip = {cube_mesh = {w = 2, h = 2}}, ipcq = ipcq}}
  torch.distributed.init_process_group{backend = "ahbm",
    config = {ccl = {algorithm = alg, dtype = "f32", algorithms = {[alg] = {world_size = 4}}}}}
  local t = torch.zeros({1, 4 * per_rank}, {dtype = "f32"})
  local rep = torch.distributed.all_reduce(t)
  kb.check(rep.check == "passed", alg .. ": data check")
  return rep.latency_ns
end

if arg[1] == "sweep" then
  local rows = kb.sweep{name = "trace", points = {{n = 16}, {n = 32}, {n = 64}}, cache = false,
    run = function(p) return {n = p.n, latency_ns = allreduce("ring_allreduce", p.n)} end}
  print(("trace sweep: %d rows"):format(#rows))
elseif arg[1] == "small" then
  print(("ring %.2f ns"):format(allreduce("ring_allreduce", 64, {n_slots = 2, slot_size = 64})))
else
  print(("ring %.2f ns"):format(allreduce("ring_allreduce", 64)))
  print(("tree %.2f ns"):format(allreduce("tree_allreduce", 64)))
end
