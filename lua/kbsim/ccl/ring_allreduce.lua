-- ring_allreduce.lua — flat ring all-reduce: N-1 pass-along rounds of whole tiles
--
-- Every round each PE sends the tile it holds east and receives its west
-- neighbour's: acc += recv, current = recv. After N-1 rounds every PE has
-- added every other PE's input once.
local tl = require("kbsim.tl")
local ccl = require("kbsim.ccl")

local function args(world_size, n_elem, opts)
  return {world_size = world_size, n_elem = n_elem, dtype = opts.dtype, op = opts.op}
end

local function kernel(a, input, output)
  local n, dt = a.n_elem, a.dtype
  local sendrecv, combine, free = tl.sendrecv, ccl.combiner(a.op), tl.free
  local acc = tl.load(input, 0, n)
  local cur = acc
  for _ = 1, a.world_size - 1 do
    -- the receive is posted before the send (sendrecv does both): a tile
    -- longer than the ring's slots blocks its send until the neighbour
    -- drains it, and every PE sends. The ring holds its own copy of what
    -- was sent, so a superseded tile is freed once sent: with every such
    -- tile returned at once, the working set stays at three tiles.
    local r = sendrecv("E", cur, "W", n, dt, cur ~= acc)
    local sum = combine(acc, r)
    free(acc)
    acc, cur = sum, r
  end
  tl.store(output, 0, acc)
end

return {
  name = "ring_allreduce",
  collective = "all_reduce",
  args = args,
  wire = ccl.wire_ring, -- a one-way ring
  kernel = kernel,
}
