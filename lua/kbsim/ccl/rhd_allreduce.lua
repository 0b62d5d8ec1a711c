-- rhd_allreduce.lua — Rabenseifner all-reduce: recursive-halving reduce-scatter, recursive-doubling all-gather
--
-- The tile is cut into p2 = 2^⌊log2 N⌋ pieces, piece q owned by core rank
-- q. Ranks beyond p2 fold in first (an even rank r < 2(N − p2) adds its
-- tile into r + 1 and gets the result back at the end). lib/rhd.lua has
-- the steps. Cost (Hockney, contention-free, p = p2, S bytes):
--   2·log2(p)·α + 2((p−1)/p)·S·β + ((p−1)/p)·S·γ      (N = p)
--   + 2(α + Sβ) + Sγ                                   (N > p: fold in and out,
--     streamed; exact, message by message: hockney.rhd_allreduce_exact)
-- counted per message: every piece is one message of S/p bytes, so the
-- halving step at bit b sends p/2^(b+1) of them (analytic.lua:
-- hockney.rhd_allreduce).
local rhd = require("kbsim.ccl.lib.rhd")
local grid = require("kbsim.ccl.lib.grid")

local NAME = "rhd_allreduce"

local function args(world_size, n_elem, opts)
  local pl = rhd.plan(world_size)
  if n_elem < pl.p2 then
    error(("'%s' needs at least %d elements (one per core rank), got %d"):format(NAME, pl.p2,
      n_elem), 0)
  end
  return {world_size = world_size, n_elem = n_elem, dtype = opts.dtype, op = opts.op}
end

local function kernel(a, input, output)
  local tl = require("kbsim.tl")
  local pl = rhd.plan(a.world_size)
  local r, np = tl.rank(), pl.p2
  local off, len = grid.pieces(a.n_elem, np)
  local all = rhd.range(np)
  local P = {}
  for q = 0, np - 1 do P[q] = tl.load(input, off(q), len(q)) end
  local j = pl.core(r)
  if not j then -- folded: hand the tile over, take the sum back
    rhd.send_list(all, P, true)
    rhd.recv_list(all, P, len, a, false)
  else
    if r < 2 * pl.ex then rhd.recv_list(all, P, len, a, true) end
    local owner = {}
    for q = 0, np - 1 do owner[q] = q end
    rhd.halving(pl, j, P, owner, np, len, a)
    rhd.doubling(pl, j, P, owner, np, len, a)
    if r < 2 * pl.ex then rhd.send_list(all, P, false) end
  end
  for q = 0, np - 1 do tl.store(output, off(q), P[q]) end
end

return {
  name = NAME,
  collective = "all_reduce",
  args = args,
  wire = rhd.wire,
  kernel = kernel,
}
