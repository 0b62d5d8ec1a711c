-- snake_ring_allreduce.lua — bandwidth-optimal ring all-reduce in snake order on a grid or torus
--
-- The ring of ring_rs_ag_allreduce, but its order is the snake
-- (boustrophedon) walk of the grid opts.dims (x fastest; default the most
-- square 2-D grid): consecutive ring members are grid neighbours, where
-- rank order jumps a whole row at every row end. With an even outermost
-- dimension the ring closes over one wrap-around link of a torus.
-- Cost: 2(N−1)(α + (S/N)β) + (N−1)(S/N)γ, α of one neighbour hop.
local grid = require("kbsim.ccl.lib.grid")
local multiring = require("kbsim.ccl.lib.multiring")

local NAME = "snake_ring_allreduce"

local function args(world_size, n_elem, opts)
  local dims = opts.dims and grid.check_dims(NAME, opts.dims, world_size)
    or grid.balanced2(world_size)
  return multiring.args(NAME, world_size, n_elem, opts, {world_size}, grid.snake(dims), "snake")
end

return {
  name = NAME,
  collective = "all_reduce",
  args = args,
  wire = multiring.wire,
  kernel = multiring.kernel,
}
