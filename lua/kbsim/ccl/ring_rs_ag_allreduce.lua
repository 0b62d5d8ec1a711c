-- ring_rs_ag_allreduce.lua — bandwidth-optimal ring all-reduce: reduce-scatter, then all-gather
--
-- The tile is cut into N chunks. N-1 reduce-scatter steps leave rank r
-- with the full sum of chunk r; N-1 all-gather steps pass the sums round.
-- Each of the 2(N-1) steps moves S/N bytes per PE.
local tl = require("kbsim.tl")
local ccl = require("kbsim.ccl")

local function args(world_size, n_elem, opts)
  if n_elem < world_size then
    error(("'ring_rs_ag_allreduce' needs at least one element per rank: n_elem %d < world size %d")
      :format(n_elem, world_size), 0)
  end
  return {world_size = world_size, n_elem = n_elem, dtype = opts.dtype, op = opts.op}
end

local function kernel(a, input, output)
  local n, N, r, dt = a.n_elem, a.world_size, tl.rank(), a.dtype
  local sendrecv, combine, free = tl.sendrecv, ccl.combiner(a.op), tl.free
  -- chunk k covers [off[k], off[k+1]): sizes differ by at most one
  local off = {}
  for k = 0, N do off[k] = k * n // N end
  local ch = {}
  for k = 0, N - 1 do ch[k] = tl.load(input, off[k], off[k + 1] - off[k]) end
  -- step s: send chunk r-s-1, add the west neighbour's chunk r-s-2; the
  -- last step completes chunk r. A partial sum that was sent is not
  -- needed again (the all-gather brings its full sum), so sendrecv frees
  -- it once sent: the working set stays near one tile.
  for s = 0, N - 2 do
    local out, inc = (r - s - 1) % N, (r - s - 2) % N
    local got = sendrecv("E", ch[out], "W", off[inc + 1] - off[inc], dt, true)
    ch[out] = nil
    local sum = combine(ch[inc], got)
    free(ch[inc], got)
    ch[inc] = sum
  end
  -- step s: pass on chunk r-s, take chunk r-s-1
  for s = 0, N - 2 do
    local out, inc = (r - s) % N, (r - s - 1) % N
    ch[inc] = sendrecv("E", ch[out], "W", off[inc + 1] - off[inc], dt)
  end
  for k = 0, N - 1 do tl.store(output, off[k], ch[k]) end
end

return {
  name = "ring_rs_ag_allreduce",
  collective = "all_reduce",
  args = args,
  wire = ccl.wire_ring, -- a one-way ring
  kernel = kernel,
}
