-- reduce_scatter.lua — ring reduce-scatter: rank d ends with the sum of every rank's chunk d
--
-- Input: N*C elements per rank; output: C. Step s sends the partial sum
-- of chunk r-s-1 east and adds the west neighbour's partial chunk r-s-2
-- to this rank's own; after N-1 steps chunk r is complete here.
local tl = require("kbsim.tl")
local ccl = require("kbsim.ccl")

local function args(world_size, n_elem, opts)
  return {world_size = world_size, n_elem = n_elem, dtype = opts.dtype, op = opts.op}
end

local function kernel(a, input, output)
  local C, N, r = a.n_elem, a.world_size, tl.rank()
  local part = tl.load(input, ((r - 1) % N) * C, C)
  for s = 0, N - 2 do
    local inc = (r - s - 2) % N
    local f = tl.recv_async("W", C, a.dtype)
    tl.send("E", part)
    tl.free(part) -- the ring holds its own copy
    local mine = tl.load(input, inc * C, C)
    local got = tl.wait(f)
    part = ccl.combine(a.op, mine, got)
    tl.free(mine, got)
  end
  tl.store(output, 0, part)
end

return {
  name = "reduce_scatter",
  collective = "reduce_scatter",
  args = args,
  wire = ccl.wire_ring, -- a one-way ring
  kernel = kernel,
}
