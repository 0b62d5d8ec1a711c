-- gather.lua — ring-chain gather: the root ends with every rank's input, in rank order
--
-- Input: n elements per rank; the root's output: N*n (block i from launch
-- index i); the other ranks' outputs are not touched (they may have none).
-- The chain runs east along the ring from the root's east neighbour to
-- the root (opts.root, a launch index): the rank u hops after the start
-- forwards the u blocks of the ranks before it, one message each, then
-- sends its own. The last link carries N-1 blocks: about (N-1) block
-- times plus the chain's N-1 hops of latency.
local tl = require("kbsim.tl")
local ccl = require("kbsim.ccl")

local function args(world_size, n_elem, opts)
  local root = ccl.root("gather", world_size, opts)
  return {world_size = world_size, n_elem = n_elem, dtype = opts.dtype, root = root}
end

local function kernel(a, input, output)
  local n, N, root = a.n_elem, a.world_size, a.root
  local u = (tl.rank() - root - 1) % N -- place in the chain; the root is last (N-1)
  -- the blocks of chain places 0 .. u-1 arrive in that order
  for j = 0, u - 1 do
    local h = tl.recv("W", n, a.dtype)
    if u < N - 1 then
      tl.send("E", h)
    else
      tl.store(output, ((root + 1 + j) % N) * n, h)
    end
    tl.free(h)
  end
  local mine = tl.load(input, 0, n)
  if u < N - 1 then tl.send("E", mine) else tl.store(output, root * n, mine) end
  tl.free(mine)
end

return {
  name = "gather",
  collective = "gather",
  args = args,
  wire = ccl.wire_ring, -- a one-way ring
  kernel = kernel,
}
