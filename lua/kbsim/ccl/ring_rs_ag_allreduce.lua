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
  -- chunk k covers [k*n//N, (k+1)*n//N): sizes differ by at most one.
  -- Worked out where needed rather than kept in a table: at system scale
  -- every rank's tables are cold each step, and arithmetic is not.
  local ch = {}
  for k = 0, N - 1 do
    local o = k * n // N
    ch[k] = tl.load(input, o, (k + 1) * n // N - o)
  end
  -- every chunk's size when N divides n (else worked out for each)
  local even = n % N == 0 and n // N
  -- step s: send the running sum of chunk r-s-1 (at s = 0 the loaded
  -- chunk), add the west neighbour's chunk r-s-2 to this rank's; the last
  -- step completes chunk r. A partial sum that was sent is not needed
  -- again (the all-gather brings its full sum), so sendrecv frees it once
  -- sent: the working set stays near one tile. The sum is kept in a
  -- local, not the table, and the table lets go of each chunk it adds.
  local inc = (r - 1) % N
  local acc = ch[inc]
  ch[inc] = nil
  for _ = 0, N - 2 do
    inc = inc == 0 and N - 1 or inc - 1 -- r-s-2 mod N
    local x = ch[inc]
    ch[inc] = nil
    local got = sendrecv("E", acc, "W", even or (inc + 1) * n // N - inc * n // N, dt, true)
    acc = combine(x, got)
    free(x, got)
  end
  -- step s: pass on chunk r-s (at s = 0 the full sum of chunk r), take
  -- chunk r-s-1
  ch[r] = acc
  inc = r
  for _ = 0, N - 2 do
    inc = inc == 0 and N - 1 or inc - 1 -- r-s-1 mod N
    acc = sendrecv("E", acc, "W", even or (inc + 1) * n // N - inc * n // N, dt)
    ch[inc] = acc
  end
  for k = 0, N - 1 do tl.store(output, k * n // N, ch[k]) end
end

return {
  name = "ring_rs_ag_allreduce",
  collective = "all_reduce",
  args = args,
  wire = ccl.wire_ring, -- a one-way ring
  kernel = kernel,
}
