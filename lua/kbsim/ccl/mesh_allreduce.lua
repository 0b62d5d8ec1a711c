-- mesh_allreduce.lua — w x h mesh all-reduce: every row all-reduces along its line, then every column
--
-- Launch indices are row-major on the w x h grid (index y*w + x): the
-- grid is opts.dims = {w, h}, else the most square one (w >= h; 2x2 for
-- 4 ranks). Links are mesh links only (no wrap-around), both ways.
-- A line of L ranks all-reduces in two chains at once: prefix sums flow
-- low to high (E, S), suffix sums high to low (W, N); rank x adds the
-- prefix of 0..x-1, its own tile and the suffix of x+1..L-1. On a line
-- of two this is one exchange. Cost (Hockney, per line of L ranks; a
-- middle rank forwards the prefix before the suffix, so the prefix climbs
-- to rank L−2 and the suffix then comes down to rank 0; δ is the part of
-- α before the bytes land):
--   line(2) = α + Sβ + Sγ
--   line(L) = 2(L − 2)(α + Sβ + Sγ) + max(δ + Sβ, Sγ)   (L ≥ 3)
-- exact against analytic.lua: hockney.mesh_allreduce (docs/collectives.md).
local tl = require("kbsim.tl")
local grid = require("kbsim.ccl.lib.grid")

local function dims_of(world_size, opts)
  if opts.dims then
    local d = grid.check_dims("mesh_allreduce", opts.dims, world_size)
    if #d ~= 2 then
      error(("'mesh_allreduce': dims must be {w, h}, got %d sizes"):format(#d), 0)
    end
    return d
  end
  if world_size == 4 then return {2, 2} end
  return grid.balanced2(world_size)
end

local function args(world_size, n_elem, opts)
  local d = dims_of(world_size, opts)
  return {world_size = world_size, n_elem = n_elem, dtype = opts.dtype, w = d[1], h = d[2]}
end

local function wire(sys, ranks, a)
  local function both(i, di, j, dj)
    tl.wire(sys, ranks[i], di, ranks[j], dj)
    tl.wire(sys, ranks[j], dj, ranks[i], di)
  end
  local w, h = a.w, a.h
  if w == 2 and h == 2 then -- the order of the 2x2 original: its channels, its times
    both(1, "E", 2, "W"); both(3, "E", 4, "W")
    both(1, "S", 3, "N"); both(2, "S", 4, "N")
    return
  end
  for y = 0, h - 1 do
    for x = 0, w - 1 do
      local i = y * w + x + 1
      if x + 1 < w then both(i, "E", i + 1, "W") end
      if y + 1 < h then both(i, "S", i + w, "N") end
    end
  end
end

-- Send and receive on one direction at once (the receive is posted first
-- so a tile longer than the ring cannot deadlock the pair).
-- Sends h to the partner across dir and returns h + the partner's tile;
-- both inputs are returned to TCM.
local function exchange(dir, h, n, dtype)
  local got = tl.sendrecv(dir, h, dir, n, dtype)
  local sum = h + got
  tl.free(h, got)
  return sum
end

-- All-reduce of acc along a line of len ranks, this one at pos.
local function line(acc, pos, len, lo, hi, n, dt)
  if len < 2 then return acc end
  if pos == 0 then return exchange(hi, acc, n, dt) end
  if pos == len - 1 then return exchange(lo, acc, n, dt) end
  local fp = tl.recv_async(lo, n, dt)
  local fs = tl.recv_async(hi, n, dt)
  local pre = tl.wait(fp)
  local up = pre + acc -- the prefix through this rank
  tl.free(pre)
  tl.send(hi, up)
  local suf = tl.wait(fs)
  local down = acc + suf -- the suffix through this rank
  tl.free(acc)
  tl.send(lo, down)
  tl.free(down)
  local sum = up + suf
  tl.free(up, suf)
  return sum
end

local function kernel(a, input, output)
  local n, r = a.n_elem, tl.rank()
  local x, y = r % a.w, r // a.w
  local acc = tl.load(input, 0, n)
  acc = line(acc, x, a.w, "W", "E", n, a.dtype)
  acc = line(acc, y, a.h, "N", "S", n, a.dtype)
  tl.store(output, 0, acc)
end

return {
  name = "mesh_allreduce",
  collective = "all_reduce",
  ops = {"sum"}, -- the registry refuses max and min
  args = args,
  wire = wire,
  kernel = kernel,
}
