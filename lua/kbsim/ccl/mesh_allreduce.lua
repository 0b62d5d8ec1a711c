-- mesh_allreduce.lua — 2x2 mesh all-reduce: exchange along the row, then the column
--
-- Launch indices are row-major on the 2x2 grid (0 1 / 2 3). After the row
-- exchange each PE holds its row's sum; after the column exchange, all.
local tl = require("kbsim.tl")

local function args(world_size, n_elem, opts)
  if world_size ~= 4 then
    error(("'mesh_allreduce' needs 4 ranks (a 2x2 mesh), got %d"):format(world_size), 0)
  end
  if opts.op ~= nil and opts.op ~= "sum" then
    error(("'mesh_allreduce' reduces with sum only, not '%s'"):format(tostring(opts.op)), 0)
  end
  return {world_size = world_size, n_elem = n_elem, dtype = opts.dtype}
end

local function wire(sys, ranks, _)
  if #ranks ~= 4 then
    error(("'mesh_allreduce' needs 4 ranks (a 2x2 mesh), got %d"):format(#ranks), 0)
  end
  local function both(a, da, b, db)
    tl.wire(sys, ranks[a], da, ranks[b], db)
    tl.wire(sys, ranks[b], db, ranks[a], da)
  end
  both(1, "E", 2, "W"); both(3, "E", 4, "W")
  both(1, "S", 3, "N"); both(2, "S", 4, "N")
end

-- Send and receive on one direction at once (the receive is posted first
-- so a tile longer than the ring cannot deadlock the pair).
-- Sends h to the partner across dir and returns h + the partner's tile;
-- both inputs are returned to TCM.
local function exchange(dir, h, n, dtype)
  local f = tl.recv_async(dir, n, dtype)
  tl.send(dir, h)
  local got = tl.wait(f)
  local sum = h + got
  tl.free(h, got)
  return sum
end

local function kernel(a, input, output)
  local n, r = a.n_elem, tl.rank()
  local hdir = (r % 2 == 0) and "E" or "W"
  local vdir = (r < 2) and "S" or "N"
  local acc = tl.load(input, 0, n)
  acc = exchange(hdir, acc, n, a.dtype)
  acc = exchange(vdir, acc, n, a.dtype)
  tl.store(output, 0, acc)
end

return {
  name = "mesh_allreduce",
  collective = "all_reduce",
  args = args,
  wire = wire,
  kernel = kernel,
}
