-- all_gather.lua — ring all-gather: every rank ends with all N inputs, rank order
--
-- Input: C elements per rank; output: N*C, chunk j = rank j's input.
-- N-1 steps: pass on the chunk received last, take the west neighbour's.
local tl = require("kbsim.tl")
local ccl = require("kbsim.ccl")

local function args(world_size, n_elem, opts)
  return {world_size = world_size, n_elem = n_elem, dtype = opts.dtype}
end

local function kernel(a, input, output)
  local C, N, r = a.n_elem, a.world_size, tl.rank()
  local cur = tl.load(input, 0, C)
  tl.store(output, r * C, cur)
  for s = 0, N - 2 do
    cur = tl.sendrecv("E", cur, "W", C, a.dtype, true) -- freed once sent (and stored)
    tl.store(output, ((r - s - 1) % N) * C, cur)
  end
end

return {
  name = "all_gather",
  collective = "all_gather",
  args = args,
  wire = ccl.wire_ring, -- a one-way ring
  kernel = kernel,
}
