-- ccl_general.lua — the collectives on odd-but-legal and on illegal input: values against a host reference, clear refusals naming this script's line
local kb = require("kbsim")
local T = require("kbsim.torch")
local tl = require("kbsim.tl")
local ccl = require("kbsim.ccl")

local function world(n, names)
  local g = {nodes = {}, links = {}}
  for i = 0, n - 1 do g.nodes[i + 1] = {name = names and names(i) or ("p" .. i), pe = true} end
  for i = 0, n - 1 do
    for j = i + 1, n - 1 do
      g.links[#g.links + 1] = {from = g.nodes[i + 1].name, to = g.nodes[j + 1].name,
        bandwidth_gbps = 64, latency_ns = 20, bidirectional = true}
    end
  end
  local torch = T.init{topology = g}
  torch.distributed.init_process_group{config = {ccl = {algorithm = "ring_allreduce", dtype = "f32"}}}
  return torch
end
local function val(r, i) return ((i * 7 + r * 13) % 11) - 5 end
local function filled(torch, n, per, dt)
  local t = torch.zeros({1, n * per}, {dtype = dt or "f32"})
  local v = {}
  for r = 0, n - 1 do for i = 0, per - 1 do v[r * per + i + 1] = val(r, i) end end
  t:copy_(torch.from_table(v, {dtype = dt or "f32"}))
  return t
end
local function red(op, a, b)
  if op == "max" then return math.max(a, b) elseif op == "min" then return math.min(a, b) end
  return a + b
end
-- every element of every rank: the reduction over ranks of val(., i0 + i)
local function expect(what, torch, t, n, C, op, base)
  for k, r in ipairs(torch.distributed.get_ranks()) do
    local got = t:shard_table(r)
    for i = 0, C - 1 do
      local j = (base and base(k) or 0) + i
      local w = val(0, j)
      for q = 1, n - 1 do w = red(op, w, val(q, j)) end
      if got[i + 1] ~= w then
        kb.check(false, ("%s: rank %d element %d is %s, want %s"):format(what, r, i, got[i + 1], w))
        return
      end
    end
  end
end
-- f(...) fails with "ccl_general.lua:LINE: want": LINE is that of the
-- innermost call in this script (the pcall below, or the line given)
local function refused(want, line, f, ...)
  local ok, err = pcall(f, ...)
  local full = ("ccl_general.lua:%d: %s"):format(line or debug.getinfo(1, "l").currentline - 1, want)
  kb.check(not ok and tostring(err):sub(1, #full) == full,
    ("want an error '%s', got %s"):format(full, ok and "success" or tostring(err)))
end
local function here() return debug.getinfo(2, "l").currentline end

-- 1. the double tree on one rank, and on one element (tree B alone)
for _, c in ipairs({{1, 1}, {1, 2}, {2, 1}, {3, 1}, {5, 1}, {8, 1}, {4, 3}}) do
  local n, C = c[1], c[2]
  local torch = world(n)
  local t = filled(torch, n, C)
  local rep = torch.distributed.all_reduce(t, {algorithm = "dbtree_allreduce"})
  kb.check(rep.check == "passed", ("dbtree n=%d C=%d: %s"):format(n, C, rep.check))
  expect(("dbtree n=%d C=%d"):format(n, C), torch, t, n, C, "sum")
end

-- 2. an unknown reduction, refused by the registry for every reducing
-- algorithm, naming it and what it accepts, at the caller's line
local torch = world(4)
local t = filled(torch, 4, 8)
local D = torch.distributed
for _, alg in ipairs({"ring_allreduce", "ring_rs_ag_allreduce", "tree_allreduce", "dbtree_allreduce",
                      "rhd_allreduce", "torus_allreduce", "snake_ring_allreduce", "auto"}) do
  refused(("'%s': unknown reduction 'prod' (accepted: sum, max, min)"):format(alg), nil,
    D.all_reduce, t, {algorithm = alg, op = "prod"})
end
refused("'mesh_allreduce' reduces with sum only, not 'max'", nil,
  D.all_reduce, t, {algorithm = "mesh_allreduce", op = "max"})
refused("'hier_allreduce' reduces with sum only, not 'avg'", nil,
  D.all_reduce, t, {algorithm = "hier_allreduce", op = "avg"})
local tout = torch.zeros({1, 4 * 2})
refused("'reduce_scatter': unknown reduction 'mx' (accepted: sum, max, min)", nil,
  D.reduce_scatter, tout, t, {op = "mx"})
refused("'rhd_reduce_scatter': unknown reduction 'prod' (accepted: sum, max, min)", nil,
  D.reduce_scatter, tout, t, {algorithm = "rhd_reduce_scatter", op = "prod"})
-- called directly, the registry's algorithm names the caller's line too
local ring = ccl.get("ring_allreduce")
local ARGS_LINE = debug.getinfo(1, "l").currentline + 1
local function args(algo, ...) local a = algo.args(...); return a end
refused("'ring_allreduce': unknown reduction 'prod' (accepted: sum, max, min)", ARGS_LINE,
  args, ring, 4, 8, {dtype = "f32", op = "prod"})

-- 3. an unknown dtype, a world size below 1, an element count below 1
refused("'ring_allreduce': unknown dtype 'int8' (f16, bf16, f32)", ARGS_LINE, args, ring, 4, 8, {dtype = "int8"})
for _, ws in ipairs({0, -1, 2.5}) do
  refused(("'mesh_allreduce': world size must be an integer >= 1, got %s"):format(ws), ARGS_LINE,
    args, ccl.get("mesh_allreduce"), ws, 8, {dtype = "f32"})
end
refused("'tree_allreduce': element count must be an integer >= 1, got 0", ARGS_LINE,
  args, ccl.get("tree_allreduce"), 4, 0, {dtype = "f32"})

-- 4. reduce's chunk count: an integer >= 1; 3 chunks give the right values
for _, k in ipairs({0, -1, 2.5}) do
  refused(("'reduce': chunks must be an integer >= 1, got %s"):format(k), ARGS_LINE,
    args, ccl.get("reduce"), 4, 8, {dtype = "f32", chunks = k})
end
refused("'broadcast': chunks must be an integer >= 1, got 0", nil,
  D.broadcast, t, 0, {chunks = 0})
do
  local torch5 = world(5)
  local inp, out = filled(torch5, 5, 7), torch5.zeros({1, 5 * 7})
  local ranks = torch5.distributed.get_ranks()
  for _, op in ipairs({"sum", "max", "min"}) do
    local algo = ccl.get("reduce")
    local a = algo.args(5, 7, {dtype = "f32", op = op, root = 3, chunks = 3})
    if op == "sum" then T.wire_once({sys = torch5.sys, wired = {}}, algo, ranks, a) end
    tl.launch(torch5.sys, ranks, algo.kernel, a, inp, out)
    torch5.sim:run()
    local got = out:shard_table(ranks[4])
    for i = 0, 6 do
      local w = val(0, i)
      for q = 1, 4 do w = red(op, w, val(q, i)) end
      kb.check(got[i + 1] == w, ("reduce %s element %d: %s, want %s"):format(op, i, got[i + 1], w))
    end
  end
end

-- 5. reduce_scatter and all_reduce with max and min: values and the host check
for _, n in ipairs({2, 3, 5}) do
  for _, op in ipairs({"max", "min"}) do
    for _, alg in ipairs({"reduce_scatter", "rhd_reduce_scatter"}) do
      local tn = world(n)
      local inp, out = filled(tn, n, n * 3, "bf16"), tn.zeros({1, n * 3}, {dtype = "bf16"})
      local rep = tn.distributed.reduce_scatter(out, inp, {algorithm = alg, op = op})
      kb.check(rep.check == "passed", ("%s %s n=%d: host check %s"):format(alg, op, n, rep.check))
      expect(("%s %s n=%d"):format(alg, op, n), tn, out, n, 3, op, function(k) return (k - 1) * 3 end)
    end
    for _, alg in ipairs({"ring_allreduce", "tree_allreduce", "dbtree_allreduce", "auto"}) do
      local tn = world(n, function(i) return ("g%d.p%d"):format(i // 2, i % 2) end)
      local x = filled(tn, n, 9, "f16")
      local rep = tn.distributed.all_reduce(x, {algorithm = alg, op = op})
      kb.check(rep.check == "passed", ("%s %s n=%d: host check %s"):format(alg, op, n, rep.check))
      kb.check(rep.chosen ~= "hier_allreduce", "auto chose hier_allreduce for " .. op)
      expect(("%s %s n=%d"):format(alg, op, n), tn, x, n, 9, op)
    end
  end
end

-- 6. the host check with values that are not finite: an overflow to inf
-- and a NaN input are matched exactly (they passed only by an infinite
-- tolerance, or failed NaN against NaN), and an inf in the reference no
-- longer lets a wrong element pass: an algorithm that does nothing fails
ccl.register{name = "ccl_general_nothing", collective = "all_reduce",
  args = function(n, C, o) return {} end, wire = function() end, kernel = function() end}
for _, dt in ipairs({"f16", "bf16", "f32"}) do
  local big = dt == "f16" and 40000 or 3e38
  for _, alg in ipairs({"ring_allreduce", "tree_allreduce", "ccl_general_nothing"}) do
    local tn = world(2)
    local x = tn.zeros({1, 4}, {dtype = dt})
    x:copy_(tn.from_table({big, 1, big, 2}, {dtype = dt}))
    local rep = tn.distributed.all_reduce(x, {algorithm = alg})
    local want = alg == "ccl_general_nothing" and "failed" or "passed"
    kb.check(rep.check == want, ("%s %s overflow: check %s, want %s"):format(alg, dt, rep.check, want))
    if want == "passed" then
      kb.check(x:to_table()[1] == math.huge and x:to_table()[2] == 3, alg .. " overflow values")
      local y = tn.zeros({1, 4}, {dtype = dt})
      y:copy_(tn.from_table({0 / 0, 1, 5, 2}, {dtype = dt}))
      rep = tn.distributed.all_reduce(y, {algorithm = alg})
      kb.check(rep.check == "passed", ("%s %s NaN: check %s"):format(alg, dt, rep.check))
      local rs = tn.distributed.reduce_scatter(tn.zeros({1, 2}, {dtype = dt}), x)
      kb.check(rs.check == "passed" and rs.max_err == 0, ("reduce_scatter %s inf: %s %s")
        :format(dt, rs.check, rs.max_err))
    end
  end
end

-- 7. a ring on a graph with no way back: the error names this line
do
  local g = {nodes = {{name = "a", pe = true}, {name = "b", pe = true}}, links = {
    {from = "a", to = "b", bandwidth_gbps = 64, latency_ns = 10}}}
  local t2 = T.init{topology = g}
  t2.distributed.init_process_group{config = {ccl = {algorithm = "ring_allreduce", dtype = "f32"}}}
  local x = t2.zeros({1, 4})
  local line = debug.getinfo(1, "l").currentline + 1
  local ok, err = pcall(function() local r = t2.distributed.all_reduce(x); return r end)
  local want = ("ccl_general.lua:%d: cannot wire 'a' 'E' to 'b' 'W': no credit route back from 'b'")
    :format(line)
  kb.check(not ok and tostring(err) == want, "no way back: " .. tostring(err))
end
print("ccl_general ok")
