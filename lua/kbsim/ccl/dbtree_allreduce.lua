-- dbtree_allreduce.lua — double binary tree all-reduce: two trees, each reducing and broadcasting half the tile
--
-- Tree A is the heap-order binary tree of tree_allreduce (launch index r
-- has children 2r+1, 2r+2); tree B is the same tree on the mirrored
-- indices N−1−r. A's inner nodes are the indices below ⌊N/2⌋, B's those
-- above N−1−⌊N/2⌋: for even N every rank is an inner node of exactly one
-- tree and a leaf of the other, so both halves climb at once and no rank
-- adds both. The first half of the tile goes up and down tree A, the
-- second half tree B, concurrently (a tile of one element: tree B alone;
-- one rank: no messages). Cost (Hockney, contention-free, D =
-- ⌊log2 N⌋, c = min(N−1, 2) children), a lower bound:
--   2D(α + (S/2)β) + D·c·(S/2)γ
-- (analytic.lua: hockney.dbtree_allreduce; exact, with one comm channel
-- a sender: hockney.dbtree_allreduce_exact, docs/collectives.md).
local tl = require("kbsim.tl")
local ccl = require("kbsim.ccl")

local NAME = "dbtree_allreduce"

-- Any world size and element count (the registry checked both): one
-- element goes up and down tree B alone, tree A carrying nothing.
local function args(world_size, n_elem, opts)
  return {world_size = world_size, n_elem = n_elem, dtype = opts.dtype, op = opts.op}
end

-- tree t ("a" or "b"): the heap index of launch index r, and back
local function heap(t, r, N) if t == "a" then return r end return N - 1 - r end

local function wire(sys, ranks, _)
  local N = #ranks
  for _, t in ipairs({"a", "b"}) do
    for c = 1, N - 1 do
      local p = (c - 1) // 2
      local side = t .. ((c % 2 == 1) and "_left" or "_right")
      local rc, rp = ranks[heap(t, c, N) + 1], ranks[heap(t, p, N) + 1]
      tl.wire(sys, rc, t .. "_parent", rp, side)
      tl.wire(sys, rp, side, rc, t .. "_parent")
    end
  end
end

local function kernel(a, input, output)
  local N, dt, r = a.world_size, a.dtype, tl.rank()
  local half = a.n_elem // 2
  local part = {a = {off = 0, n = half}, b = {off = half, n = a.n_elem - half}}
  for _, t in ipairs({"a", "b"}) do
    local p = part[t]
    p.h = heap(t, r, N)
    p.left, p.right = 2 * p.h + 1 < N, 2 * p.h + 2 < N
    p.inner = p.left or p.right
  end
  -- every receive this rank will need, posted before any send; a tree
  -- with no elements (a tile of one) sends nothing
  for _, t in ipairs({"a", "b"}) do
    local p = part[t]
    if p.n == 0 then p.left, p.right, p.h = false, false, 0 end
    p.fl = p.left and tl.recv_async(t .. "_left", p.n, dt)
    p.fr = p.right and tl.recv_async(t .. "_right", p.n, dt)
    p.acc = p.n > 0 and tl.load(input, p.off, p.n)
  end
  -- up: the tree where this rank is a leaf first (nothing to wait for),
  -- then the one where it adds its children
  local order = part.a.inner and {"b", "a"} or {"a", "b"}
  for _, t in ipairs(order) do
    local p = part[t]
    for _, f in ipairs({p.fl or false, p.fr or false}) do
      if f then
        local got = tl.wait(f)
        local sum = ccl.combine(a.op, p.acc, got)
        tl.free(p.acc, got)
        p.acc = sum
      end
    end
    if p.h > 0 then
      tl.send(t .. "_parent", p.acc)
      tl.free(p.acc)
      p.down = tl.recv_async(t .. "_parent", p.n, dt)
    end
  end
  -- down: the inner tree first, so its children are not kept waiting
  for i = #order, 1, -1 do
    local t = order[i]
    local p = part[t]
    if p.down then p.acc = tl.wait(p.down) end
    if p.left then tl.send(t .. "_left", p.acc) end
    if p.right then tl.send(t .. "_right", p.acc) end
  end
  for _, t in ipairs({"a", "b"}) do
    local p = part[t]
    if p.n > 0 then tl.store(output, p.off, p.acc) end
  end
end

return {
  name = NAME,
  collective = "all_reduce",
  args = args,
  wire = wire,
  kernel = kernel,
}
