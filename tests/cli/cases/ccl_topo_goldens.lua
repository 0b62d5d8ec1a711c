-- ccl_topo_goldens.lua — every element of the topology-aware collectives against the host reference, at several rank counts and sizes
--
-- Input on rank r: in_r[i] = i + 100 r (f32, exact sums). One SIP of 2x2
-- cubes (32 PEs); world size and options per case. Checks every element
-- of every rank, not only the report's own check.
local kb = require("kbsim")
local T = require("kbsim.torch")

local function world(alg, n)
  local torch = T.init{topology = {sips = {count = 1}, sip = {cube_mesh = {w = 2, h = 2}}}}
  torch.distributed.init_process_group{backend = "ahbm",
    config = {ccl = {algorithm = alg, dtype = "f32", algorithms = {[alg] = {world_size = n}}}}}
  kb.check(torch.distributed.get_world_size() == n, ("%s: world size %d"):format(alg, n))
  return torch
end

local function input(torch, n, per_rank)
  local t = torch.zeros({1, n * per_rank}, {dtype = "f32"})
  local v = {}
  for r = 0, n - 1 do
    for i = 0, per_rank - 1 do v[r * per_rank + i + 1] = i + 100 * r end
  end
  t:copy_(torch.from_table(v, {dtype = "f32"}))
  return t
end

local fails = 0
local function expect(what, rep, got, want)
  kb.check(rep.check == "passed", what .. ": host check " .. tostring(rep.check))
  for j = 1, #want do
    if got[j] ~= want[j] then
      fails = fails + 1
      kb.check(false, ("%s: element %d is %s, want %s"):format(what, j - 1, tostring(got[j]), want[j]))
      return
    end
  end
end

local lines = {}
local function all_reduce(alg, n, C, opts)
  local torch = world(alg, n)
  local t = input(torch, n, C)
  local rep = torch.distributed.all_reduce(t, opts)
  local base = 100 * n * (n - 1) // 2
  local got = t:to_table()
  local want = {}
  for r = 0, n - 1 do
    for i = 0, C - 1 do want[r * C + i + 1] = n * i + base end
  end
  local what = ("%s n=%d C=%d"):format(alg, n, C)
  expect(what, rep, got, want)
  lines[#lines + 1] = ("%-22s n=%-2d C=%-4d %10.1f ns"):format(alg, n, C, rep.latency_ns)
  return rep
end

local function all_gather(alg, n, C)
  local torch = world("ring_allreduce", n)
  local inp = input(torch, n, C)
  local out = torch.zeros({1, n * n * C}, {dtype = "f32"})
  local rep = torch.distributed.all_gather(out, inp, {algorithm = alg})
  kb.check(rep.algorithm == alg, "all_gather ran " .. rep.algorithm)
  local want = {}
  for q = 0, n - 1 do
    for i = 0, C - 1 do want[q * C + i + 1] = 100 * q + i end
  end
  for r = 0, n - 1 do
    expect(("%s n=%d C=%d rank %d"):format(alg, n, C, r), rep, out:shard_table(r), want)
  end
  lines[#lines + 1] = ("%-22s n=%-2d C=%-4d %10.1f ns"):format(alg, n, C, rep.latency_ns)
end

local function reduce_scatter(alg, n, C)
  local torch = world("ring_allreduce", n)
  local rin = input(torch, n, n * C)
  local rout = torch.zeros({1, n * C}, {dtype = "f32"})
  local rep = torch.distributed.reduce_scatter(rout, rin, {algorithm = alg})
  kb.check(rep.algorithm == alg, "reduce_scatter ran " .. rep.algorithm)
  local base = 100 * n * (n - 1) // 2
  for d = 0, n - 1 do
    local want = {}
    for j = 0, C - 1 do want[j + 1] = n * (d * C + j) + base end
    expect(("%s n=%d C=%d rank %d"):format(alg, n, C, d), rep, rout:shard_table(d), want)
  end
  lines[#lines + 1] = ("%-22s n=%-2d C=%-4d %10.1f ns"):format(alg, n, C, rep.latency_ns)
end

for _, n in ipairs({2, 3, 4, 5, 6, 7, 8, 12, 16}) do
  for _, C in ipairs({n, 37, 1000}) do
    all_reduce("rhd_allreduce", n, C)
    all_reduce("snake_ring_allreduce", n, C)
    all_reduce("torus_allreduce", n, C)
    all_reduce("dbtree_allreduce", n, C)
    all_reduce("mesh_allreduce", n, C)
    all_gather("rhd_all_gather", n, C)
    reduce_scatter("rhd_reduce_scatter", n, C)
  end
end
-- explicit grids: 3-D torus order, a 2-D mesh w x h
all_reduce("torus_allreduce", 8, 64, {dims = {2, 2, 2}})
all_reduce("torus_allreduce", 12, 48, {dims = {3, 2, 2}})
all_reduce("torus_allreduce", 27, 54, {dims = {3, 3, 3}})
all_reduce("snake_ring_allreduce", 27, 54, {dims = {3, 3, 3}})
all_reduce("mesh_allreduce", 6, 50, {dims = {3, 2}})
all_reduce("mesh_allreduce", 15, 50, {dims = {5, 3}})
all_reduce("mesh_allreduce", 7, 50, {dims = {7, 1}})
-- hierarchical: groups from the grid's PE names (one cube = 8 PEs), and given
all_reduce("hier_allreduce", 16, 40)
all_reduce("hier_allreduce", 20, 40)
all_reduce("hier_allreduce", 7, 40, {groups = {{0, 2, 4}, {1, 3}, {5}, {6}}})
all_reduce("hier_allreduce", 1, 40)
-- the chooser, checked by value whatever it picks
for _, n in ipairs({1, 5, 8, 12}) do
  for _, C in ipairs({n, 3000}) do
    local rep = all_reduce("auto", n, C)
    kb.check(type(rep.chosen) == "string", "auto reports its choice")
    lines[#lines] = lines[#lines] .. "  chose " .. rep.chosen
  end
end
local rep = all_reduce("auto", 8, 800, {dims = {2, 2, 2}})
lines[#lines] = lines[#lines] .. "  chose " .. rep.chosen
for _, alg in ipairs({"rhd_allreduce", "dbtree_allreduce", "torus_allreduce",
                      "snake_ring_allreduce", "mesh_allreduce"}) do
  all_reduce(alg, 1, 5)
end

-- bad options: clear messages, no run
local function refused(alg, n, opts, want, C)
  local torch = world(alg, n)
  local t = input(torch, n, C or 16)
  local ok, err = pcall(torch.distributed.all_reduce, t, opts)
  kb.check(not ok and tostring(err):find(want, 1, true),
    ("%s: want an error with '%s', got %s"):format(alg, want, tostring(err)))
  print("refused: " .. tostring(err))
end
refused("torus_allreduce", 8, {dims = {3, 3}}, "'torus_allreduce': dims 3x3 hold 9 ranks, the world size is 8")
refused("torus_allreduce", 8, {dims = {2, 0, 4}}, "dims[2] must be an integer >= 1")
refused("mesh_allreduce", 8, {dims = {2, 2, 2}}, "'mesh_allreduce': dims must be {w, h}")
refused("hier_allreduce", 4, {groups = {{0, 1}, {1, 2, 3}}}, "launch index 1 is in groups[1] and groups[2]")
refused("hier_allreduce", 4, {groups = {{0, 1}, {2}}}, "launch index 3 is in no group")
refused("auto", 4, {gamma_ns_per_byte = -1}, "gamma_ns_per_byte must be a number >= 0")
refused("auto", 4, {groups = {{0, 1}, {2, 9}}}, "groups[2][2] = 9 is not a launch index 0..3")
refused("auto", 6, {dims = {4, 2}}, "'auto': dims 4x2 hold 8 ranks, the world size is 6")
refused("rhd_allreduce", 8, nil, "'rhd_allreduce' needs at least 8 elements (one per core rank), got 4", 4)
refused("torus_allreduce", 4, nil, "'torus_allreduce' needs at least one element per rank: n_elem 3 < world size 4", 3)
do -- a graph whose PE names mark no group
  local g = {nodes = {}, links = {}}
  for i = 0, 3 do g.nodes[i + 1] = {name = "p" .. i, pe = true} end
  for i = 0, 3 do
    g.links[i + 1] = {from = "p" .. i, to = "p" .. (i + 1) % 4, bandwidth_gbps = 64,
                      bidirectional = true}
  end
  local torch = T.init{topology = g}
  torch.distributed.init_process_group{config = {ccl = {algorithm = "hier_allreduce", dtype = "f32"}}}
  local ok, err = pcall(torch.distributed.all_reduce, input(torch, 4, 8))
  kb.check(not ok and tostring(err):find("PE 'p0' (rank 0) marks no group", 1, true),
    "unmarked graph: " .. tostring(err))
  print("refused: " .. tostring(err))
end
print(table.concat(lines, "\n"))
kb.check(fails == 0, fails .. " cases wrong")
print("ccl_topo_goldens ok")
