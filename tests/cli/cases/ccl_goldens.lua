-- ccl_goldens.lua — the float32 goldens of HARDWARE_MODEL.md for all-reduce, all-gather and reduce-scatter at n = 2, 4, 8, 16
--
-- Input on rank r: in_r[i] = i + 100 r. Each case builds its own
-- simulation on one SIP of 2x2 cubes (32 PEs) and checks every element.
local kb = require("kbsim")
local T = require("kbsim.torch")

local C = 24 -- elements per rank

local function world(alg, n)
  local torch = T.init{topology = {sips = {count = 1}, sip = {cube_mesh = {w = 2, h = 2}}}}
  torch.distributed.init_process_group{backend = "ahbm",
    config = {ccl = {algorithm = alg, dtype = "f32", algorithms = {[alg] = {world_size = n}}}}}
  kb.check(torch.distributed.get_world_size() == n, ("%s: world size %d"):format(alg, n))
  return torch
end

-- A tensor whose shard on rank r holds per_rank elements f(r, i).
local function input(torch, n, per_rank, f)
  local t = torch.zeros({1, n * per_rank}, {dtype = "f32"})
  local v = {}
  for r = 0, n - 1 do
    for i = 0, per_rank - 1 do v[r * per_rank + i + 1] = f(r, i) end
  end
  t:copy_(torch.from_table(v, {dtype = "f32"}))
  return t
end

local function expect(what, rep, got, want)
  kb.check(rep.check == "passed", what .. ": host check " .. rep.check)
  local bad = 0
  for j = 1, #want do
    if got[j] ~= want[j] then
      if bad == 0 then
        kb.check(false, ("%s: element %d is %s, want %s"):format(what, j - 1, tostring(got[j]), want[j]))
      end
      bad = bad + 1
    end
  end
  kb.check(rep.latency_ns > 0, what .. ": latency > 0")
  return bad == 0
end

local lines = {}
for _, n in ipairs({2, 4, 8, 16}) do
  local base = 100 * n * (n - 1) // 2
  for _, alg in ipairs({"ring_allreduce", "ring_rs_ag_allreduce", "tree_allreduce"}) do
    local torch = world(alg, n)
    local t = input(torch, n, C, function(r, i) return i + 100 * r end)
    local rep = torch.distributed.all_reduce(t)
    local want = {}
    for r = 0, n - 1 do
      for i = 0, C - 1 do want[r * C + i + 1] = n * i + base end
    end
    expect(("%s n=%d"):format(alg, n), rep, t:to_table(), want)
    lines[#lines + 1] = ("%-22s n=%-2d %10.1f ns"):format(alg, n, rep.latency_ns)
  end

  local torch = world("ring_allreduce", n)
  local inp = input(torch, n, C, function(r, i) return i + 100 * r end)
  local out = torch.zeros({1, n * n * C}, {dtype = "f32"})
  local rep = torch.distributed.all_gather(out, inp)
  for r = 0, n - 1 do
    local want = {}
    for q = 0, n - 1 do
      for i = 0, C - 1 do want[q * C + i + 1] = 100 * q + i end
    end
    expect(("all_gather n=%d rank %d"):format(n, r), rep, out:shard_table(r), want)
  end
  lines[#lines + 1] = ("%-22s n=%-2d %10.1f ns"):format("all_gather", n, rep.latency_ns)

  local rin = input(torch, n, n * C, function(r, i) return i + 100 * r end)
  local rout = torch.zeros({1, n * C}, {dtype = "f32"})
  rep = torch.distributed.reduce_scatter(rout, rin)
  for d = 0, n - 1 do
    local want = {}
    for j = 0, C - 1 do want[j + 1] = n * (d * C + j) + base end
    expect(("reduce_scatter n=%d rank %d"):format(n, d), rep, rout:shard_table(d), want)
  end
  lines[#lines + 1] = ("%-22s n=%-2d %10.1f ns"):format("reduce_scatter", n, rep.latency_ns)
end
print(table.concat(lines, "\n"))
print("ccl_goldens ok")
