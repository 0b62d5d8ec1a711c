-- hier_allreduce.lua — hierarchical (lrab-style) all-reduce over marked groups of ranks, for graph systems too
--
-- Groups: opts.groups, a list of lists of launch indices (0-based; every
-- index exactly once), else the PEs' node names: a PE named
-- "GROUP.LOCAL" (e.g. "node0.gpu3"; the text before the last dot) is in
-- group GROUP, so a graph marks its groups by naming its PEs, and a grid
-- system's PEs ("sip0.cube1.pe2") group by cube. Groups keep the order of
-- their first members; a group's leader is its first member.
--   1. each group reduces to its leader up a binary tree in heap order
--      of its members;
--   2. the leaders all-reduce around a ring (G − 1 pass-along rounds,
--      as lrab's SIP roots do);
--   3. each leader broadcasts down its tree.
-- Cost (Hockney; inside a group α_i, β_i, between leaders α_o, β_o; D =
-- ⌊log2 of the largest group⌋, c = min(its size − 1, 2)):
--   2D(α_i + Sβ_i) + D·c·Sγ + (G − 1)(α_o + Sβ_o + Sγ)
-- (analytic.lua: hockney.hier_allreduce).
local tl = require("kbsim.tl")
local ccl = require("kbsim.ccl")

local NAME = "hier_allreduce"

local function check_groups(groups, N)
  if type(groups) ~= "table" or #groups == 0 then
    error(("'%s': groups must be a list of lists of launch indices"):format(NAME), 0)
  end
  local seen = {}
  for g, list in ipairs(groups) do
    if type(list) ~= "table" or #list == 0 then
      error(("'%s': groups[%d] must be a non-empty list of launch indices"):format(NAME, g), 0)
    end
    for k, i in ipairs(list) do
      if math.type(i) ~= "integer" or i < 0 or i >= N then
        error(("'%s': groups[%d][%d] = %s is not a launch index 0..%d"):format(NAME, g, k,
          tostring(i), N - 1), 0)
      end
      if seen[i] then
        error(("'%s': launch index %d is in groups[%d] and groups[%d]"):format(NAME, i, seen[i], g), 0)
      end
      seen[i] = g
    end
  end
  for i = 0, N - 1 do
    if not seen[i] then
      error(("'%s': launch index %d is in no group"):format(NAME, i), 0)
    end
  end
  local copy = {}
  for g, list in ipairs(groups) do copy[g] = {table.unpack(list)} end
  return copy
end

-- Groups from the PEs' names: the text before the last dot.
local function groups_from_names(sys, ranks)
  local by, groups = {}, {}
  for i, r in ipairs(ranks) do
    local name = sys:pe(r).name
    local key = name:match("^(.*)%.[^.]*$")
    if not key then
      error(("'%s': PE '%s' (rank %d) marks no group: name the PEs GROUP.LOCAL "
        .. "(e.g. node0.gpu1) or pass groups"):format(NAME, name, r), 0)
    end
    if not by[key] then
      by[key] = #groups + 1
      groups[#groups + 1] = {}
    end
    table.insert(groups[by[key]], i - 1)
  end
  return groups
end

local function args(world_size, n_elem, opts)
  return {world_size = world_size, n_elem = n_elem, dtype = opts.dtype,
          groups = opts.groups and check_groups(opts.groups, world_size)}
end

-- Fills a.group_of, a.pos (index in its group) and wires trees and ring.
local function wire(sys, ranks, a)
  a.groups = a.groups or groups_from_names(sys, ranks)
  local G = a.groups
  a.group_of, a.pos = {}, {}
  for g, list in ipairs(G) do
    for k, i in ipairs(list) do a.group_of[i], a.pos[i] = g, k - 1 end
  end
  for _, list in ipairs(G) do
    for c = 1, #list - 1 do
      local p = (c - 1) // 2
      local side = (c % 2 == 1) and "h_left" or "h_right"
      local rc, rp = ranks[list[c + 1] + 1], ranks[list[p + 1] + 1]
      tl.wire(sys, rc, "h_parent", rp, side)
      tl.wire(sys, rp, side, rc, "h_parent")
    end
  end
  if #G > 1 then
    for g = 1, #G do
      local nxt = G[g % #G + 1]
      tl.wire(sys, ranks[G[g][1] + 1], "h_ring_tx", ranks[nxt[1] + 1], "h_ring_rx")
    end
  end
end

local function kernel(a, input, output)
  local n, dt, i = a.n_elem, a.dtype, tl.rank()
  local g = a.group_of[i]
  local list, k = a.groups[g], a.pos[i]
  local size = #list
  local left, right = 2 * k + 1 < size, 2 * k + 2 < size
  local fl = left and tl.recv_async("h_left", n, dt)
  local fr = right and tl.recv_async("h_right", n, dt)
  local acc = tl.load(input, 0, n)
  local function add(f)
    local got = tl.wait(f)
    local sum = acc + got
    tl.free(acc, got)
    acc = sum
  end
  if fl then add(fl) end
  if fr then add(fr) end
  if k > 0 then
    tl.send("h_parent", acc)
    tl.free(acc)
    acc = tl.recv("h_parent", n, dt)
  elseif #a.groups > 1 then
    -- the leaders' pass-along ring
    local cur = acc
    for _ = 1, #a.groups - 1 do
      local got = tl.sendrecv("h_ring_tx", cur, "h_ring_rx", n, dt, cur ~= acc)
      local sum = ccl.combine("sum", acc, got)
      tl.free(acc)
      acc, cur = sum, got
    end
    if cur ~= acc then tl.free(cur) end
  end
  if left then tl.send("h_left", acc) end
  if right then tl.send("h_right", acc) end
  tl.store(output, 0, acc)
end

return {
  name = NAME,
  collective = "all_reduce",
  ops = {"sum"}, -- the registry refuses max and min
  args = args,
  wire = wire,
  kernel = kernel,
  check_groups = check_groups, -- for auto.lua, which may pass groups on
}
