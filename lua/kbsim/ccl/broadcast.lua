-- broadcast.lua — ring broadcast from a source rank, pipelined in chunks
--
-- The tile travels east along the ring from opts.src (a launch index)
-- and stops one short of it. With k chunks (opts.chunks, default 1) a PE
-- forwards chunk c while chunk c+1 is still on its way, so the time is
-- about (N-1+k-1) chunk hops instead of (N-1) whole-tile hops.
local tl = require("kbsim.tl")
local ccl = require("kbsim.ccl")

local function args(world_size, n_elem, opts)
  local src = opts.src or 0
  if math.type(src) ~= "integer" or src < 0 or src >= world_size then
    error(("'broadcast': source rank %s is not in 0..%d"):format(tostring(src), world_size - 1), 0)
  end
  local chunks = ccl.chunks("broadcast", n_elem, opts)
  return {world_size = world_size, n_elem = n_elem, dtype = opts.dtype, src = src,
          chunks = chunks}
end

local function kernel(a, input, output)
  local n, N, k = a.n_elem, a.world_size, a.chunks
  local v = (tl.rank() - a.src) % N -- distance from the source along the ring
  for c = 0, k - 1 do
    local off = c * n // k
    local len = (c + 1) * n // k - off
    local h
    if v == 0 then
      h = tl.load(input, off, len)
    else
      h = tl.recv("W", len, a.dtype)
    end
    if v < N - 1 then tl.send("E", h) end
    tl.store(output, off, h)
    tl.free(h)
  end
end

return {
  name = "broadcast",
  collective = "broadcast",
  args = args,
  wire = ccl.wire_ring, -- a one-way ring
  kernel = kernel,
}
