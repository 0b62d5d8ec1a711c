-- ccl_matrix.lua — the correctness matrix: flat ring x {tcm, sram, hbm}, ring on 8 and 16, mesh on 4, tree on 7, the default topology as-is
--
-- Like the original's ccl_allreduce bench: rank r's shard holds r + 1
-- (f16), and after the all-reduce every element is the sum 1 + ... + n.
local kb = require("kbsim")
local T = require("kbsim.torch")

local N_ELEM = 64

-- The IPCQ rings live where the system's ipcq.buffer_kind puts them, so
-- the buffer kind goes into the topology as well as into ccl.yaml.
local function run(label, alg, n, buffer_kind, topology)
  topology.ipcq = {buffer_kind = buffer_kind}
  local torch = T.init{topology = topology}
  local algos = n and {[alg] = {world_size = n}} or {}
  torch.distributed.init_process_group{backend = "ahbm",
    config = {ccl = {algorithm = alg, buffer_kind = buffer_kind, algorithms = algos}}}
  local D = torch.distributed
  local ws = D.get_world_size()
  local t = torch.zeros({1, ws * N_ELEM}, {dtype = "f16"})
  local v = {}
  for r = 0, ws - 1 do
    for i = 1, N_ELEM do v[r * N_ELEM + i] = r + 1 end
  end
  t:copy_(torch.from_table(v, {dtype = "f16"}))
  local rep = D.all_reduce(t)
  local want = ws * (ws + 1) / 2
  local bad = 0
  for _, x in ipairs(t:to_table()) do
    if math.abs(x - want) > want * 2 ^ -10 * ws then bad = bad + 1 end
  end
  kb.check(rep.check == "passed", label .. ": host check " .. rep.check)
  kb.check(bad == 0, ("%s: %d elements differ from %g"):format(label, bad, want))
  print(("%-24s %-20s ws=%-3d %10.1f ns  busbw %7.2f GB/s  %s"):format(label, rep.algorithm, ws,
    rep.latency_ns, rep.busbw_gbps, rep.check))
end

local function cube4() return {sips = {count = 1}, sip = {cube_mesh = {w = 2, h = 2}}} end
run("ring_tcm", "ring_allreduce", 4, "tcm", cube4())
run("ring_sram", "ring_allreduce", 4, "sram", cube4())
run("ring_hbm", "ring_allreduce", 4, "hbm", cube4())
run("ring_8", "ring_allreduce", 8, "tcm", cube4())
run("ring_16", "ring_allreduce", 16, "tcm", cube4())
run("mesh_4", "mesh_allreduce", 4, "tcm", cube4())
run("tree_7", "tree_allreduce", 7, "tcm", cube4())
-- configs/topology.yaml and configs/ccl.yaml as they are
do
  local torch = T.init{}
  torch.distributed.init_process_group{backend = "ahbm"}
  local D = torch.distributed
  local ws = D.get_world_size()
  local n = D.get_config().n_elem
  local t = torch.zeros({1, ws * n}, {dtype = D.get_config().dtype})
  local v = {}
  for r = 0, ws - 1 do
    for i = 1, n do v[r * n + i] = r + 1 end
  end
  t:copy_(torch.from_table(v, {dtype = t.dtype}))
  local rep = D.all_reduce(t)
  kb.check(rep.check == "passed", "default topology: host check " .. rep.check)
  print(("%-24s %-20s ws=%-3d %10.1f ns  busbw %7.2f GB/s  %s"):format("default", rep.algorithm, ws,
    rep.latency_ns, rep.busbw_gbps, rep.check))
end
print("ccl_matrix ok")
