-- torus_allreduce.lua — per-dimension (multi-ring) all-reduce for 2-D and 3-D tori
--
-- opts.dims = {dx, dy[, dz]} gives the torus (launch index i at x = i % dx,
-- y = (i // dx) % dy, z = i // (dx dy), as a torus graph built x-fastest
-- numbers its PEs); without it the ranks form the most square 2-D grid.
-- A ring reduce-scatter along x, then along y (on the x-chunk), then z;
-- the all-gathers in reverse. Every ring uses only neighbour links of the
-- torus. Cost and algorithm: lib/multiring.lua, docs/collectives.md.
local grid = require("kbsim.ccl.lib.grid")
local multiring = require("kbsim.ccl.lib.multiring")

local NAME = "torus_allreduce"

local function args(world_size, n_elem, opts)
  local dims = opts.dims and grid.check_dims(NAME, opts.dims, world_size)
    or grid.balanced2(world_size)
  local order = {}
  for i = 0, world_size - 1 do order[i + 1] = i end
  return multiring.args(NAME, world_size, n_elem, opts, dims, order, "torus")
end

return {
  name = NAME,
  collective = "all_reduce",
  args = args,
  wire = multiring.wire,
  kernel = multiring.kernel,
}
