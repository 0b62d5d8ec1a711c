-- ccl_rooted.lua — torch.distributed.reduce, gather and scatter: torch's meaning (only the root's tensor or list changes; every rank gets its block of the root's), values against the inputs, and clear refusals naming this script's line
local kb = require("kbsim")
local T = require("kbsim.torch")

local N, C = 4, 6
local g = {nodes = {}, links = {}}
for i = 0, N - 1 do g.nodes[i + 1] = {name = "p" .. i, pe = true} end
for i = 0, N - 1 do
  for j = i + 1, N - 1 do
    g.links[#g.links + 1] = {from = "p" .. i, to = "p" .. j, bandwidth_gbps = 64, latency_ns = 20,
      bidirectional = true}
  end
end
local torch = T.init{topology = g}
local D = torch.distributed
D.init_process_group{config = {ccl = {algorithm = "ring_allreduce", dtype = "f32"}}}

local function val(r, i) return ((i * 7 + r * 13) % 11) - 5 end
-- a tensor whose shard on rank r holds f(r, i), i = 0..len-1
local function filled(len, f, ranks)
  local t = torch.zeros({len}, {placement = "replicate", ranks = ranks})
  for _, r in ipairs(ranks or D.get_ranks()) do
    local v = {}
    for i = 0, len - 1 do v[i + 1] = f(r, i) end
    t:shard_copy_(r, v)
  end
  return t
end
local function same(what, got, want)
  for i = 1, math.max(#got, #want) do
    if got[i] ~= want[i] then
      kb.check(false, ("%s: element %d is %s, want %s"):format(what, i - 1, tostring(got[i]),
        tostring(want[i])))
      return
    end
  end
end
local function ok(what, rep, coll)
  kb.check(rep.collective == coll and rep.algorithm == coll, what .. ": collective " .. rep.collective)
  kb.check(rep.check == "passed", what .. ": host check " .. rep.check)
  kb.check(rep.latency_ns > 0 and rep.per_rank_ns[0] and rep.per_rank_ns[N - 1],
    what .. ": timing recorded")
  kb.check(rep.world_size == N, what .. ": world size")
end
local function red(op, a, b)
  if op == "max" then return math.max(a, b) elseif op == "min" then return math.min(a, b) end
  return a + b
end
local function sentinel(r, i) return 100 * (r + 1) + i end

-- reduce: dst's shard is the reduction, the other shards unchanged
for _, c in ipairs({{2, nil, {}}, {0, "max", {}}, {3, "min", {chunks = 3}}, {1, "sum", {positional = true}}}) do
  local dst, op = c[1], c[2]
  local t = filled(C, val)
  local rep
  if c[3].positional then
    rep = D.reduce(t, dst, {op = op})
  else
    local o = {dst = dst, op = op, chunks = c[3].chunks}
    rep = D.reduce(t, o)
  end
  local what = ("reduce dst=%d op=%s"):format(dst, op or "sum")
  ok(what, rep, "reduce")
  kb.check(rep.bytes == C * 4 and rep.busbw_gbps == rep.algbw_gbps, what .. ": bytes, busbw")
  for r = 0, N - 1 do
    local want = {}
    for i = 0, C - 1 do
      local w = val(0, i)
      if r == dst then for q = 1, N - 1 do w = red(op, w, val(q, i)) end else w = val(r, i) end
      want[i + 1] = w
    end
    same(("%s rank %d"):format(what, r), t:shard_table(r), want)
  end
end
-- reduce with the default dst (0)
do
  local t = filled(C, val)
  ok("reduce default dst", D.reduce(t), "reduce")
  local want = {}
  for i = 0, C - 1 do want[i + 1] = val(0, i) + val(1, i) + val(2, i) + val(3, i) end
  same("reduce default dst", t:shard_table(0), want)
end

-- gather into a tensor: dst's shard holds block k from rank k; the other
-- ranks' output shards are untouched
for _, dst in ipairs({0, 3}) do
  local inp = filled(C, val)
  local out = filled(N * C, sentinel)
  local rep = D.gather(out, inp, {dst = dst})
  local what = ("gather dst=%d"):format(dst)
  ok(what, rep, "gather")
  kb.check(rep.bytes == N * C * 4, what .. ": bytes")
  for r = 0, N - 1 do
    local want = {}
    for i = 0, N * C - 1 do
      want[i + 1] = r == dst and val(i // C, i % C) or sentinel(r, i)
    end
    same(("%s rank %d"):format(what, r), out:shard_table(r), want)
  end
end
-- gather into a list (torch's gather_list), only on dst; positional dst
do
  local dst = 2
  local inp = filled(C, val)
  local list = {}
  for k = 1, N do list[k] = filled(C, sentinel, {dst}) end
  ok("gather list", D.gather(list, inp, dst), "gather")
  for k = 1, N do
    local want = {}
    for i = 0, C - 1 do want[i + 1] = val(k - 1, i) end
    same(("gather list[%d]"):format(k), list[k]:shard_table(dst), want)
  end
  -- again (the staging buffer is reused) with other inputs
  local inp2 = filled(C, function(r, i) return -val(r, i) end)
  ok("gather list again", D.gather(list, inp2, {dst = dst}), "gather")
  same("gather list again", list[4]:shard_table(dst), {-val(3, 0), -val(3, 1), -val(3, 2),
    -val(3, 3), -val(3, 4), -val(3, 5)})
end

-- scatter from a tensor: rank k's output is block k of src's input; the
-- input is needed on src only
for _, src in ipairs({0, 1}) do
  local inp = filled(N * C, function(_, i) return val(i // C, i % C) * 3 end, {src})
  local out = filled(C, sentinel)
  local rep = D.scatter(out, inp, {src = src})
  local what = ("scatter src=%d"):format(src)
  ok(what, rep, "scatter")
  for r = 0, N - 1 do
    local want = {}
    for i = 0, C - 1 do want[i + 1] = val(r, i) * 3 end
    same(("%s rank %d"):format(what, r), out:shard_table(r), want)
  end
end
-- scatter from a list (torch's scatter_list)
do
  local src = 3
  local list = {}
  for k = 1, N do list[k] = filled(C, function(_, i) return 10 * k + i end, {src}) end
  local out = filled(C, sentinel)
  ok("scatter list", D.scatter(out, list, src), "scatter")
  for r = 0, N - 1 do
    local want = {}
    for i = 0, C - 1 do want[i + 1] = 10 * (r + 1) + i end
    same(("scatter list rank %d"):format(r), out:shard_table(r), want)
  end
end

-- inside spawn: every worker calls it, it runs once
torch.multiprocessing.spawn(function(rank, n)
  local t = filled(C, val)
  local rep = D.reduce(t, {dst = n - 1})
  if rank == 0 then ok("reduce in spawn", rep, "reduce") end
end, N)

-- refusals, each at the line of the call (f: a one-line function calling
-- the collective)
local function refused(want, f)
  local line = debug.getinfo(f, "S").linedefined
  local ok_, err = pcall(f)
  local full = ("ccl_rooted.lua:%d: %s"):format(line, want)
  kb.check(not ok_ and tostring(err):sub(1, #full) == full,
    ("want an error '%s', got %s"):format(full, ok_ and "success" or tostring(err)))
end
local t = filled(C, val)
local before = t:shard_table(0)
local big, three = filled(N * C, val), {filled(C, val), filled(C, val), filled(C, val)}
local mixed = {filled(C, val), filled(C, val), filled(C - 1, val), filled(C, val)}
local small, partial = filled(2 * C, val), filled(N * C, val, {0, 1})
local half = torch.zeros({N * C}, {placement = "replicate", dtype = "bf16"})
-- the root outside the group, or not a rank
refused("reduce: dst rank 4 is not a rank of the group (0..3)", function() D.reduce(t, {dst = 4}) end)
refused("reduce: dst rank -1 is not a rank of the group (0..3)", function() D.reduce(t, -1) end)
refused("reduce: dst rank 1.5 is not a rank of the group (0..3)", function() D.reduce(t, 1.5) end)
refused("reduce: dst rank 'a' is not a rank of the group (0..3)", function() D.reduce(t, {dst = "a"}) end)
refused("reduce: dst given twice", function() D.reduce(t, 1, {dst = 2}) end)
refused("gather: dst rank 7 is not a rank of the group (0..3)", function() D.gather(big, t, 7) end)
refused("scatter: src rank -2 is not a rank of the group (0..3)", function() D.scatter(t, big, {src = -2}) end)
-- a bad reduction, options that are not the collective's
refused("'reduce': unknown reduction 'prod' (accepted: sum, max, min)", function() D.reduce(t, {op = "prod"}) end)
refused("reduce: unknown option 'group'", function() D.reduce(t, {dst = 0, group = {0, 1}}) end)
refused("gather: unknown option 'op'", function() D.gather(big, t, {op = "sum"}) end)
refused("algorithm 'gather' is a gather, not a reduce", function() D.reduce(t, {algorithm = "gather"}) end)
-- lists of the wrong length or with a short tensor, tensors too small,
-- without the root's shard or of another dtype
refused("gather: gather list has 3 tensors, the group has 4 ranks", function() D.gather(three, t, 0) end)
refused("scatter: scatter list has 3 tensors, the group has 4 ranks", function() D.scatter(t, three, {src = 1}) end)
refused("gather: gather list[3]: shards of 5 elements, the collective needs 6", function() D.gather(mixed, t) end)
refused("gather: output: shards of 12 elements, the collective needs 24", function() D.gather(small, t) end)
refused("scatter: input has no shard on rank 2 of the process group", function() D.scatter(t, partial, {src = 2}) end)
refused("gather: output is bf16, the input f32", function() D.gather(half, t) end)
refused("reduce: tensor must be a tensor", function() D.reduce({1, 2}, 0) end)
-- nothing ran: the refused reduces left the tensor alone
same("refused reduces", t:shard_table(0), before)
print("ccl_rooted ok")
