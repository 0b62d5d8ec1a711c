-- reduce.lua — ring-chain reduce to one root rank, pipelined in chunks
--
-- The partial reduction travels east along the ring, starting at the
-- root's east neighbour and ending at the root (opts.root, a launch
-- index): the rank u hops after the start receives the partial of the u
-- ranks before it, combines its own input (opts.op: sum, max, min; PE_MATH)
-- and passes it on. Only the root stores: the other ranks' outputs are
-- left as they were (torch.distributed.reduce). With k chunks
-- (opts.chunks, default 1) chunk c+1 follows chunk c down the chain, so
-- the time is about (N-1+k-1) chunk hops and combines.
local tl = require("kbsim.tl")
local ccl = require("kbsim.ccl")

local function args(world_size, n_elem, opts)
  -- opts.op was checked by the registry (sum, max, min)
  local root = ccl.root("reduce", world_size, opts)
  return {world_size = world_size, n_elem = n_elem, dtype = opts.dtype, root = root,
          op = opts.op, chunks = ccl.chunks("reduce", n_elem, opts)}
end

local function kernel(a, input, output)
  local n, N, k = a.n_elem, a.world_size, a.chunks
  local u = (tl.rank() - a.root - 1) % N -- place in the chain; the root is last (N-1)
  for c = 0, k - 1 do
    local off = c * n // k
    local len = (c + 1) * n // k - off
    local part = tl.load(input, off, len)
    if u > 0 then
      local got = tl.recv("W", len, a.dtype)
      local sum = ccl.combine(a.op, got, part)
      tl.free(got, part)
      part = sum
    end
    if u < N - 1 then tl.send("E", part) else tl.store(output, off, part) end
    tl.free(part)
  end
end

return {
  name = "reduce",
  collective = "reduce",
  args = args,
  wire = ccl.wire_ring, -- a one-way ring
  kernel = kernel,
}
