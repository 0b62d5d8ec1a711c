-- lrab.lua — hierarchical center-root all-reduce (the milestone algorithm)
--
-- Only PE 0 of each cube takes part; each holds its cube's shard. Inside
-- a SIP of w x h cubes the root is cube (h//2)*w + w//2:
--   1. rows reduce toward the root column (left half W->E, right half E->W);
--   2. the root column reduces toward the root row (top N->S, bottom S->N);
--   3. the SIP roots exchange over global_* directions: ring_1d n-1
--      pass-along rounds; torus_2d / mesh_2d a row ring then a column ring;
--      mesh_2d_no_wrap a chain reduce and broadcast along rows, then columns;
--   4. the sum comes back down, mirroring steps 2 and 1.
-- Launch index i = sip * cubes_per_sip + cube, so ranks() lists PE 0 of
-- each cube in that order.
local tl = require("kbsim.tl")

local WRAPS = {ring_1d = true, torus_2d = true, mesh_2d = true, mesh_2d_no_wrap = false}

local function geometry(topo)
  if not topo or not topo.cube_w then
    error("'lrab' needs a system of SIPs and cubes, not a graph topology "
      .. "(hier_allreduce reduces over groups marked in a graph)", 0)
  end
  local g = {
    cw = topo.cube_w, ch = topo.cube_h, ppc = topo.pes_per_cube,
    nsips = topo.sips, kind = topo.sip_topology,
  }
  if WRAPS[g.kind] == nil then
    error(("'lrab': unknown SIP topology '%s'"):format(tostring(g.kind)), 0)
  end
  if g.kind == "ring_1d" then
    g.sw, g.sh = g.nsips, 1
  else
    g.sw, g.sh = topo.sip_w, topo.sip_h
  end
  g.cps = g.cw * g.ch
  g.rx, g.ry = g.cw // 2, g.ch // 2
  return g
end

-- PE 0 of every cube, SIP by SIP.
local function ranks(topo, world_size)
  local g = geometry(topo)
  local n = g.nsips * g.cps
  if world_size and world_size ~= n then
    error(("'lrab' runs on PE 0 of every cube: world size must be %d, got %d"):format(n, world_size), 0)
  end
  local list = {}
  for i = 0, n - 1 do list[i + 1] = i * g.ppc end
  return list
end

local function args(world_size, n_elem, opts)
  local g = geometry(opts.topology)
  if world_size ~= g.nsips * g.cps then
    error(("'lrab' runs on PE 0 of every cube: world size must be %d, got %d")
      :format(g.nsips * g.cps, world_size), 0)
  end
  return {world_size = world_size, n_elem = n_elem, dtype = opts.dtype, g = g}
end

local function wire(sys, list, a)
  local g = a.g
  local function idx(s, x, y) return s * g.cps + y * g.cw + x + 1 end
  local function both(i, di, j, dj)
    tl.wire(sys, list[i], di, list[j], dj)
    tl.wire(sys, list[j], dj, list[i], di)
  end
  for s = 0, g.nsips - 1 do
    for y = 0, g.ch - 1 do
      for x = 0, g.cw - 1 do
        if x + 1 < g.cw then both(idx(s, x, y), "E", idx(s, x + 1, y), "W") end
        if y + 1 < g.ch then both(idx(s, x, y), "S", idx(s, x, y + 1), "N") end
      end
    end
  end
  -- SIP roots: E/W along grid rows, N/S along grid columns
  local function root(sx, sy) return idx(sy * g.sw + sx, g.rx, g.ry) end
  local wraps = WRAPS[g.kind]
  for sy = 0, g.sh - 1 do
    for sx = 0, g.sw - 1 do
      local me = root(sx, sy)
      if g.sw > 1 then
        if wraps then
          tl.wire(sys, list[me], "global_E", list[root((sx + 1) % g.sw, sy)], "global_W")
        elseif sx + 1 < g.sw then
          both(me, "global_E", root(sx + 1, sy), "global_W")
        end
      end
      if g.sh > 1 then
        if wraps then
          tl.wire(sys, list[me], "global_S", list[root(sx, (sy + 1) % g.sh)], "global_N")
        elseif sy + 1 < g.sh then
          both(me, "global_S", root(sx, sy + 1), "global_N")
        end
      end
    end
  end
end

-- Reduce a line of `len` cubes toward position `at`: cubes below it pass
-- their partial sum toward `hi`, cubes above it toward `lo`; `at` adds both.
-- acc + got, returning both to TCM: every step below frees what it has
-- used, so a PE holds at most three tiles.
local function plus(acc, got)
  local sum = acc + got
  tl.free(acc, got)
  return sum
end

local function reduce_line(acc, pos, at, len, lo, hi, n, dt)
  if pos < at then
    if pos > 0 then acc = plus(acc, tl.recv(lo, n, dt)) end
    tl.send(hi, acc)
  elseif pos > at then
    if pos < len - 1 then acc = plus(acc, tl.recv(hi, n, dt)) end
    tl.send(lo, acc)
  else
    local fl = at > 0 and tl.recv_async(lo, n, dt)
    local fh = at < len - 1 and tl.recv_async(hi, n, dt)
    if fl then acc = plus(acc, tl.wait(fl)) end
    if fh then acc = plus(acc, tl.wait(fh)) end
  end
  return acc
end

-- The mirror of reduce_line: the value spreads out from `at`.
local function bcast_line(acc, pos, at, len, lo, hi, n, dt)
  if pos < at then
    tl.free(acc)
    acc = tl.recv(hi, n, dt)
    if pos > 0 then tl.send(lo, acc) end
  elseif pos > at then
    tl.free(acc)
    acc = tl.recv(lo, n, dt)
    if pos < len - 1 then tl.send(hi, acc) end
  else
    if at > 0 then tl.send(lo, acc) end
    if at < len - 1 then tl.send(hi, acc) end
  end
  return acc
end

-- Pass-along ring all-reduce over `len` members: len-1 rounds.
local function ring(acc, len, tx, rx, n, dt)
  local cur = acc
  for _ = 1, len - 1 do
    local r = tl.sendrecv(tx, cur, rx, n, dt, cur ~= acc)
    local sum = acc + r
    tl.free(acc)
    acc, cur = sum, r
  end
  if cur ~= acc then tl.free(cur) end
  return acc
end

-- Chain all-reduce: sum toward the high end, then back down the chain.
local function chain(acc, pos, len, lo, hi, n, dt)
  if len < 2 then return acc end
  if pos > 0 then acc = plus(acc, tl.recv(lo, n, dt)) end
  if pos < len - 1 then
    tl.send(hi, acc)
    tl.free(acc)
    acc = tl.recv(hi, n, dt)
  end
  if pos > 0 then tl.send(lo, acc) end
  return acc
end

local function kernel(a, input, output)
  local g, n, dt = a.g, a.n_elem, a.dtype
  local i = tl.rank()
  local s, c = i // g.cps, i % g.cps
  local x, y = c % g.cw, c // g.cw
  local acc = tl.load(input, 0, n)
  acc = reduce_line(acc, x, g.rx, g.cw, "W", "E", n, dt)
  if x == g.rx then
    acc = reduce_line(acc, y, g.ry, g.ch, "N", "S", n, dt)
    if y == g.ry and g.nsips > 1 then
      local sx, sy = s % g.sw, s // g.sw
      if WRAPS[g.kind] then
        acc = ring(acc, g.sw, "global_E", "global_W", n, dt)
        acc = ring(acc, g.sh, "global_S", "global_N", n, dt)
      else
        acc = chain(acc, sx, g.sw, "global_W", "global_E", n, dt)
        acc = chain(acc, sy, g.sh, "global_N", "global_S", n, dt)
      end
    end
    acc = bcast_line(acc, y, g.ry, g.ch, "N", "S", n, dt)
  end
  acc = bcast_line(acc, x, g.rx, g.cw, "W", "E", n, dt)
  tl.store(output, 0, acc)
end

return {
  name = "lrab",
  collective = "all_reduce",
  ops = {"sum"}, -- the registry refuses max and min
  ranks = ranks,
  args = args,
  wire = wire,
  kernel = kernel,
}
