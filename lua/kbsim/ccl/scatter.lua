-- scatter.lua — ring-chain scatter: block i of the root's input goes to launch index i
--
-- The root's input: N*n elements; every rank's output: n (the other ranks
-- need no input). The root (opts.root, a launch index) sends east the
-- blocks of the ranks 1 .. N-1 hops away, the farthest first; a rank d
-- hops away forwards the first N-1-d blocks it receives and keeps the
-- last, its own. The root copies its own block locally. The first link
-- carries N-1 blocks: about (N-1) block times plus N-1 hops of latency.
local tl = require("kbsim.tl")
local ccl = require("kbsim.ccl")

local function args(world_size, n_elem, opts)
  local root = ccl.root("scatter", world_size, opts)
  return {world_size = world_size, n_elem = n_elem, dtype = opts.dtype, root = root}
end

local function kernel(a, input, output)
  local n, N, root = a.n_elem, a.world_size, a.root
  local d = (tl.rank() - root) % N -- hops from the root
  if d == 0 then
    for far = N - 1, 1, -1 do
      local h = tl.load(input, ((root + far) % N) * n, n)
      tl.send("E", h)
      tl.free(h)
    end
    local mine = tl.load(input, root * n, n)
    tl.store(output, 0, mine)
    tl.free(mine)
    return
  end
  for _ = 1, N - 1 - d do
    local h = tl.recv("W", n, a.dtype)
    tl.send("E", h)
    tl.free(h)
  end
  local mine = tl.recv("W", n, a.dtype)
  tl.store(output, 0, mine)
  tl.free(mine)
end

return {
  name = "scatter",
  collective = "scatter",
  args = args,
  wire = ccl.wire_ring, -- a one-way ring
  kernel = kernel,
}
